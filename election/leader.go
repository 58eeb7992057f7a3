package election

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// serve leads one term: it takes the next epoch, calls lead, and guards the
// term until leadership is lost; it returns once lead has returned, with the
// cause of the end of the term.
func (e *Election) serve(ctx context.Context, c *candidate, lead func(context.Context, Term)) error {
	w, epoch, sent, err := e.takeOffice(ctx, c)
	if err != nil {
		return err
	}

	term := Term{Epoch: epoch, Node: c.node, SessionID: c.session}
	leaderCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := &termState{resign: make(chan struct{}), released: make(chan struct{})}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()

	guarded, returned := make(chan struct{}), make(chan struct{})
	e.leading.Store(true)
	e.terms.Add(1)
	e.logc(zerolog.InfoLevel, c).Int64("epoch", epoch).Msg("election: elected leader")
	go func() {
		defer close(guarded)
		e.guard(leaderCtx, cancel, c, w.session, w.ch, t, sent)
		e.awaitReturn(leaderCtx, c, epoch, returned)
	}()
	lead(leaderCtx, term)
	close(returned)
	cancel(ErrLeadReturned)
	<-guarded
	e.leading.Store(false)

	cause := context.Cause(leaderCtx)
	ev := e.logc(zerolog.InfoLevel, c).Int64("epoch", epoch).AnErr("cause", cause)
	switch {
	case errors.Is(cause, ErrResigned), errors.Is(cause, ErrLeadReturned):
		e.resignations.Add(1)
		ev.Msg("election: resigned leadership")
	case ctx.Err() != nil:
		ev.Msg("election: stopped leading: shutting down")
	default:
		e.losses.Add(1)
		e.logc(zerolog.WarnLevel, c).Int64("epoch", epoch).AnErr("cause", cause).Msg("election: lost leadership")
	}
	return cause
}

// watched is a node's stat and data watch, with the session (connection)
// that holds the watch.
type watched struct {
	st      *zkclient.Stat
	ch      <-chan zkclient.Event
	session zkclient.Session
}

// takeOffice sets the data watch on our own node (the fastest sign of its
// deletion: it fires at the same moment as the successor's watch) and takes
// the next epoch. It retries through connection loss rather than give up
// our place at the head of the queue. sent is the send time of the request
// that proved our session alive.
func (e *Election) takeOffice(ctx context.Context, c *candidate) (w watched, epoch int64, sent time.Time, err error) {
	pause := e.retryPolicy()
	for failures := 0; ; failures++ {
		if e.client.SessionID() != c.session {
			return w, 0, sent, ErrSessionLost
		}
		w, err = call(ctx, e, func(s zkclient.Session) (watched, error) {
			_, st, ch, err := s.GetW(ctx, c.node)
			return watched{st, ch, s}, err
		})
		if err == nil {
			sent = time.Now()
			epoch, err = e.nextEpoch(ctx, c, w.st.Version)
		}
		switch {
		case err == nil && e.client.SessionID() == c.session:
			// The multi that took the epoch went through the quorum
			// leader and proved our node, so our session, alive after sent.
			return w, epoch, sent, nil
		case err == nil:
			return w, 0, sent, ErrSessionLost
		case errors.Is(err, zkclient.ErrNoNode):
			return w, 0, sent, ErrNodeLost
		case !zkclient.IsTransient(err) || ctx.Err() != nil:
			return w, 0, sent, err
		}
		if pause.Wait(ctx, failures) != nil {
			return w, 0, sent, ctx.Err()
		}
	}
}

// guard watches a term and ends it, by clearing IsLeader and then cancelling
// the leader context, on the first sign that leadership may be lost.
// lastAck is the send time of the last request known to have reached the
// server in our session: the server cannot expire the session before
// lastAck + session timeout, so the term ends at lastAck + lossAfter.
// own is the data watch on our node, held by session.
func (e *Election) guard(ctx context.Context, cancel context.CancelCauseFunc, c *candidate, session zkclient.Session, own <-chan zkclient.Event, t *termState, lastAck time.Time) {
	lose := func(cause error) {
		e.leading.Store(false)
		cancel(cause)
	}
	changes, stop := e.client.Changes()
	defer stop()
	beats := make(chan beat, 1)
	go e.heartbeat(ctx, c, beats)
	timer := time.NewTimer(time.Until(lastAck.Add(e.lossAfter)))
	defer timer.Stop()
	check := func() error {
		switch {
		case e.client.SessionID() != c.session:
			return ErrSessionLost
		case time.Since(lastAck) >= e.lossAfter, e.client.DisconnectedFor() >= e.lossAfter:
			return fmt.Errorf("%w: last request acknowledged %s ago, limit %s",
				ErrContactLost, time.Since(lastAck).Round(time.Millisecond), e.lossAfter)
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			e.leading.Store(false)
			return
		case <-t.resign:
			lose(ErrResigned)
			return
		case ev := <-own:
			own = nil
			switch {
			case ev.Type == zkclient.EventNodeDeleted:
				lose(ErrNodeLost)
				return
			case ev.Type == zkclient.EventNotWatching && errors.Is(ev.Err, zkclient.ErrClosing) && session.Current():
				// The watch's connection was closed and is still the
				// client's (a redial would have replaced it): Close.
				lose(ErrClientClosed)
				return
			case ev.Type == zkclient.EventNotWatching:
				lose(ErrSessionLost)
				return
			default:
				// Someone changed our node's data. The heartbeat still
				// checks that the node exists.
				e.logc(zerolog.WarnLevel, c).Str("event", ev.Type.String()).Msg("election: candidate node changed by someone else")
			}
		case <-changes:
			if err := check(); err != nil {
				lose(err)
				return
			}
		case b := <-beats:
			if b.err != nil {
				lose(b.err)
				return
			}
			if b.sent.After(lastAck) {
				lastAck = b.sent
				timer.Reset(time.Until(lastAck.Add(e.lossAfter)))
			}
		case <-timer.C:
			if err := check(); err != nil {
				lose(err)
				return
			}
			timer.Reset(time.Until(lastAck.Add(e.lossAfter)))
		}
	}
}

// awaitReturn warns while lead is slow to return after its context ended:
// until it does, this replica keeps its node and no other can lead.
func (e *Election) awaitReturn(ctx context.Context, c *candidate, epoch int64, returned <-chan struct{}) {
	patience := e.client.SessionTimeout()
	for {
		t := time.NewTimer(patience)
		select {
		case <-returned:
			t.Stop()
			return
		case <-t.C:
			e.logc(zerolog.ErrorLevel, c).Int64("epoch", epoch).AnErr("cause", context.Cause(ctx)).
				Msg("election: lead has not returned since leadership ended; no other replica can lead until it does")
			patience *= 2
		}
	}
}

// beat is one heartbeat's outcome: an acknowledgement of a request sent at
// sent, or the reason the term is over.
type beat struct {
	sent time.Time
	err  error
}

// heartbeat proves, every lossAfter/4 and once at once, that the session
// is alive on the quorum: go-zookeeper's own pings are answered by
// whichever server the client is connected to, even one cut off from the
// quorum, and their replies are not visible to us. The beat (beat.go) is
// a transaction, which goes through the quorum leader, checks the
// session, and fails if our node is gone; the candidate next in line
// watches it.
func (e *Election) heartbeat(ctx context.Context, c *candidate, out chan<- beat) {
	tick := time.NewTicker(e.lossAfter / 4)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		if !e.client.HasSession() {
			continue // nothing to learn; see call on queued requests
		}
		b := beat{sent: time.Now()}
		err := e.beat(ctx, e.client.Session(), c)
		if err != nil && !errors.Is(err, ErrNodeLost) {
			e.logc(zerolog.DebugLevel, c).Err(err).Msg("election: heartbeat failed")
			continue // the guard's deadline decides
		}
		if took := time.Since(b.sent); took > e.lossAfter/4 {
			e.logc(zerolog.DebugLevel, c).Int64("took_ms", took.Milliseconds()).Msg("election: slow heartbeat")
		}
		switch {
		case e.client.SessionID() != c.session:
			b.err = ErrSessionLost
		case err != nil:
			b.err = err
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if b.err != nil {
			return
		}
	}
}

// nextEpoch increments the epoch in one multi-op with a version check of
// our own candidate node: the increment happens only while we lead, so no
// two terms share an epoch and every later term gets a larger one.
func (e *Election) nextEpoch(ctx context.Context, c *candidate, ownVersion int32) (int64, error) {
	type read struct {
		data []byte
		st   *zkclient.Stat
	}
	for {
		r, err := call(ctx, e, func(s zkclient.Session) (read, error) {
			data, st, err := s.Get(ctx, e.epochPath)
			return read{data, st}, err
		})
		check := zkclient.CheckOp(c.node, ownVersion)
		var next int64
		var op zkclient.Op
		switch {
		case errors.Is(err, zkclient.ErrNoNode):
			next = 1
			op = zkclient.CreateOp(e.epochPath, formatEpoch(next), 0)
			if acl := e.leafACL(ctx); acl != nil {
				op = op.WithACL(acl)
			}
		case err != nil:
			return 0, fmt.Errorf("read epoch %s: %w", e.epochPath, err)
		default:
			cur, err := parseEpoch(r.data)
			if err != nil {
				return 0, fmt.Errorf("epoch node %s: %w", e.epochPath, err)
			}
			next = cur + 1
			op = zkclient.SetOp(e.epochPath, formatEpoch(next), r.st.Version)
		}
		_, err = call(ctx, e, func(s zkclient.Session) ([]zkclient.OpResult, error) { return s.Multi(ctx, check, op) })
		switch {
		case err == nil:
			return next, nil
		case zkclient.FailedOp(err) == 0:
			// Our node is gone or not what we made: we do not lead.
			return 0, fmt.Errorf("%w: %w", ErrNodeLost, err)
		case zkclient.FailedOp(err) == 1 && (errors.Is(err, zkclient.ErrBadVersion) || errors.Is(err, zkclient.ErrNodeExists)):
			// Someone else wrote the epoch since we read it (an operator;
			// no leader can): read it again.
			e.logc(zerolog.WarnLevel, c).Str("epoch_node", e.epochPath).Msg("election: epoch changed while taking it; retrying")
			continue
		default:
			return 0, fmt.Errorf("take epoch %d at %s: %w", next, e.epochPath, err)
		}
	}
}

// The epoch is decimal text, readable in zkCli.
func formatEpoch(n int64) []byte { return []byte(strconv.FormatInt(n, 10)) }

func parseEpoch(data []byte) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, nil // created empty by hand: no term yet
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("holds %q, want a non-negative decimal integer: set it by hand above every epoch in use", s)
	}
	return n, nil
}
