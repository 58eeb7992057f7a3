package election

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The crash probe (crash.go) learns of a crash only from a host that
// answers. A host that vanishes (a node failure, a pod deleted with its
// IP, a cut network) or a leader cut off from ZooKeeper gives no
// refusal, and its node stays until the server expires its session, one
// session timeout after the process last spoke; the leader itself has
// stopped long before, at lossAfter (guard). So the leader's heartbeat
// is a write the others can see: every lossAfter/4 it sets the beat
// znode (Path/leader-beat) to its own node's name and its lossAfter, in
// one transaction with a check that its node exists, which also proves
// the session alive on the quorum.
//
// The candidate next in line reads the beat every Config.CrashProbe.
// When the beat names its predecessor and has not moved for the
// predecessor's lossAfter plus an eighth of it (beatMargin), counted from
// the first read that saw it, the predecessor has had no write
// acknowledged since (any acknowledged beat would have moved it), so it
// has stopped leading on its own (ErrContactLost), unless it is paused: the candidate deletes
// the predecessor's node in one transaction with a check of the beat's
// version, so a beat that lands meanwhile keeps the node. A leader
// paused past that (a long GC, a frozen VM) loses its node as it would
// its session, and the store's epoch fences it (docs/guarantees.md).
//
// A leader of an older version writes no beat: the beat then names
// another node or none, and the candidate waits for the session to
// expire.

// beatName is the beat znode's name in the candidate directory; it does
// not parse as a candidate (parseNode), so every version ignores it.
const beatName = "leader-beat"

// beatMargin is what the candidate next in line waits past its
// predecessor's lossAfter before it deletes the node of a predecessor
// whose beat stood still. The predecessor's term ends at the send time of
// its last acknowledged beat plus lossAfter, which is before the
// candidate first read that beat, so the margin is only for the
// predecessor's own stop: its guard's timer firing late, and its
// cancellation reaching the primary. A primary later than that is fenced
// by the store's epoch (docs/guarantees.md). An eighth is 625 ms at a
// 10 s session.
func beatMargin(lossAfter time.Duration) time.Duration { return lossAfter / 8 }

// beatData is the beat znode's content.
type beatData struct {
	// Node is the leader's candidate node's name.
	Node string `json:"node"`
	// LossAfterMS is the leader's lossAfter in milliseconds: it stops
	// leading once no request has been acknowledged for that long.
	LossAfterMS int64 `json:"loss_after_ms"`
}

// ErrBeatStopped is the reason logged, and counted in
// Stats.CrashDeletions, when a candidate deletes the node of a
// predecessor whose heartbeat stopped.
var ErrBeatStopped = errors.New("election: the predecessor's heartbeat stopped for longer than it may lead without one")

// beat writes the leader's heartbeat and reports whether the
// transaction reached the quorum leader with c's node in place: nil, or
// ErrNodeLost, or the failure (nothing learnt). A beat that could not be
// written (a directory whose ACL forbids it, a beat znode deleted
// meanwhile) still proves the node and the session: the check before it
// passed.
func (e *Election) beat(ctx context.Context, s zkclient.Session, c *candidate) error {
	data, _ := json.Marshal(beatData{Node: path.Base(c.node), LossAfterMS: e.lossAfter.Milliseconds()})
	check := zkclient.CheckOp(c.node, zkclient.AnyVersion)
	_, err := s.Multi(ctx, check, zkclient.SetOp(e.beatPath, data, zkclient.AnyVersion))
	if zkclient.FailedOp(err) == 1 && errors.Is(err, zkclient.ErrNoNode) {
		op := zkclient.CreateOp(e.beatPath, data, 0)
		if acl := e.leafACL(ctx); acl != nil {
			op = op.WithACL(acl)
		}
		_, err = s.Multi(ctx, check, op)
	}
	switch {
	case err == nil:
		return nil
	case zkclient.FailedOp(err) == 0 && (errors.Is(err, zkclient.ErrNoNode) || errors.Is(err, zkclient.ErrBadVersion)):
		return ErrNodeLost
	case zkclient.FailedOp(err) == 1 && errors.Is(err, zkclient.ErrNodeExists):
		return nil // made meanwhile (a previous leader's last beat): the next beat sets it
	case zkclient.FailedOp(err) == 1:
		level := zerolog.DebugLevel
		if !c.beatWarned {
			level, c.beatWarned = zerolog.WarnLevel, true
		}
		e.logc(level, c).Err(err).Str("beat", e.beatPath).
			Msg("election: cannot write the heartbeat znode (its ACL?); leadership holds, but if this leader stops the others wait for its session to expire")
		return nil
	}
	return err
}

// stillBeat is a beat that stood still too long: its version, and for
// how long it had.
type stillBeat struct {
	version int32
	still   time.Duration
}

// watchBeat reads the beat every crashProbe while c waits next in line
// behind p, and sends on the channel it returns once p's beat has stood
// still too long (see above); it returns nil (never ready) when probing
// is off.
func (e *Election) watchBeat(ctx context.Context, c *candidate, p predecessor) <-chan stillBeat {
	if e.crashProbe <= 0 {
		return nil
	}
	out := make(chan stillBeat, 1)
	go func() {
		tick := time.NewTicker(e.crashProbe)
		defer tick.Stop()
		name := path.Base(p.node)
		type read struct {
			data []byte
			st   *zkclient.Stat
		}
		var (
			mzxid   int64     // of the beat last read: every write moves it, a beat made again too
			version int32     // of the beat last read, for the delete's check
			since   time.Time // when a read first saw mzxid; zero: no beat of p seen
		)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r, err := call(ctx, e, func(s zkclient.Session) (read, error) {
				data, st, err := s.Get(ctx, e.beatPath)
				return read{data, st}, err
			})
			if err != nil {
				continue // no beat (an older leader), or no answer: nothing learnt
			}
			var b beatData
			if json.Unmarshal(r.data, &b) != nil || b.Node != name || b.LossAfterMS <= 0 {
				since = time.Time{}
				continue
			}
			if since.IsZero() || r.st.Mzxid != mzxid {
				mzxid, version, since = r.st.Mzxid, r.st.Version, time.Now()
				continue
			}
			limit := time.Duration(b.LossAfterMS) * time.Millisecond
			if still := time.Since(since); still >= limit+beatMargin(limit) && e.client.SessionID() == c.session {
				out <- stillBeat{version, still}
				return
			}
		}
	}()
	return out
}

// deleteSilent deletes p's node if the beat is still at version, and
// reports whether p's node is gone.
func (e *Election) deleteSilent(ctx context.Context, c *candidate, p predecessor, b stillBeat) bool {
	ctx, cancel := context.WithTimeout(ctx, e.client.SessionTimeout())
	defer cancel()
	_, err := call(ctx, e, func(s zkclient.Session) ([]zkclient.OpResult, error) {
		return s.Multi(ctx, zkclient.CheckOp(e.beatPath, b.version), zkclient.DeleteOp(p.node, p.version))
	})
	ev := e.logc(zerolog.WarnLevel, c).Str("predecessor", p.node).Str("address", p.address).
		Dur("beat_still_ms", b.still).AnErr("cause", ErrBeatStopped)
	switch {
	case err == nil:
		e.crashDeletions.Add(1)
		ev.Msg("election: deleted the candidate node of a predecessor whose heartbeat stopped rather than wait for its session to expire")
		return true
	case zkclient.FailedOp(err) == 1 && (errors.Is(err, zkclient.ErrNoNode) || errors.Is(err, zkclient.ErrBadVersion)):
		ev.Msg("election: a silent predecessor's node went meanwhile")
		return true
	case zkclient.FailedOp(err) == 0:
		e.logc(zerolog.DebugLevel, c).Str("predecessor", p.node).Msg("election: the predecessor's heartbeat moved just in time")
		return false
	}
	ev.Err(err).Msg("election: could not delete a silent predecessor's node; watching its heartbeat again")
	return false
}
