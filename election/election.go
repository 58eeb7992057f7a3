package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults and limits of Config.LossFraction.
const (
	DefaultLossFraction = 0.5
	// MaxLossFraction leaves at least a fifth of the session timeout between
	// the leader stopping and the earliest moment the server can expire its
	// session: room for timer and scheduling delays and for a follower's
	// session touch to reach the quorum leader.
	MaxLossFraction = 0.8
)

// Errors returned by this package. The Err*Lost family and ErrResigned are
// also the causes of a cancelled leadership context:
// context.Cause(leaderCtx) tells why a term ended.
var (
	// ErrNoLeader is returned by Leader when no replica is a candidate.
	ErrNoLeader = errors.New("election: no leader")
	// ErrNotLeader is returned by Resign when this replica is not leading.
	ErrNotLeader = errors.New("election: not the leader")
	// ErrRunning is returned by Run when another Run of the same Election is
	// in progress: one Election is one candidate.
	ErrRunning = errors.New("election: Run already in progress")

	// ErrResigned ends a term on Resign.
	ErrResigned = errors.New("election: resigned")
	// ErrNodeLost ends a term whose candidate node is gone.
	ErrNodeLost = errors.New("election: candidate node deleted")
	// ErrSessionLost ends a term whose ZooKeeper session expired or was
	// replaced.
	ErrSessionLost = errors.New("election: zookeeper session expired or replaced")
	// ErrContactLost ends a term when no request was acknowledged for
	// LossFraction of the session timeout: the server may be about to
	// expire the session.
	ErrContactLost = errors.New("election: no contact with zookeeper for too long")
	// ErrClientClosed ends a term when the zkclient.Client was closed.
	ErrClientClosed = errors.New("election: zookeeper client closed")
	// ErrLeadReturned ends a term whose lead function returned on its own;
	// the replica resigns.
	ErrLeadReturned = errors.New("election: lead function returned")
)

// Identity names a replica to the others. It is stored as JSON in the
// replica's candidate node, so that every replica, the CLI and status pages
// can tell who leads and where to reach it.
type Identity struct {
	// ID is unique per replica (a host name, a pod name). Required.
	ID string `json:"id"`
	// Address is where the replica serves its API, host:port.
	Address string `json:"address,omitempty"`
	// Version is the replica's software version.
	Version string `json:"version,omitempty"`
}

// Term is one continuous leadership of one replica.
type Term struct {
	// Epoch is the fencing token: strictly greater than the epoch of every
	// earlier term of any replica (while ZooKeeper keeps its data). Record it
	// with every write made as leader.
	Epoch int64
	// Node is the candidate node's full path.
	Node string
	// SessionID is the ZooKeeper session that owns Node.
	SessionID int64
}

// Config configures an Election. Client, Path and Identity.ID are required;
// New fills in the rest. The nodes the election creates get the Client's
// ACL.
type Config struct {
	// Client is the process's shared ZooKeeper session. It must stay open
	// while Run runs. Its SessionTimeout is the time base of LossFraction.
	Client *zkclient.Client
	// Path is the candidate directory, such as "/seqkeeper/election",
	// created if missing. The epoch lives next to it in Path+"-epoch". Every
	// replica of one cluster uses the same Path.
	Path string
	// Identity is published in the candidate node.
	Identity Identity
	// LossFraction: leadership is given up once no request has been
	// acknowledged for this fraction of the session timeout, so the old
	// primary stops before the server can expire its session and a
	// successor start. Smaller gives more margin and more spurious
	// step-downs on a slow network. Default DefaultLossFraction; must lie in
	// (0, MaxLossFraction].
	LossFraction float64
	// CrashProbe is how often the candidate next in line connects to the
	// address its predecessor published (Identity.Address) to learn that
	// the predecessor's process is gone: once the address, after
	// accepting a connection, refuses two in a row, the candidate deletes
	// the predecessor's node instead of waiting one session timeout for
	// the server to expire it (crash.go says when that guess can be
	// wrong, and why it stays safe). As often it reads the leader's
	// heartbeat, and deletes the node of a predecessor whose heartbeat
	// stood still past that predecessor's lossAfter and an eighth more
	// (beat.go). 0: off.
	CrashProbe time.Duration
	// Logger receives every transition. Default: disabled.
	Logger zerolog.Logger
}

// Stats counts an Election's transitions since New, for metrics.
type Stats struct {
	// Candidacies counts candidate nodes created or adopted.
	Candidacies int64 `json:"candidacies"`
	// Terms counts the times this replica became leader.
	Terms int64 `json:"terms"`
	// Resignations counts terms ended by Resign or by lead returning.
	Resignations int64 `json:"resignations"`
	// Losses counts terms ended by a lost node, session or contact, or a
	// closed client.
	Losses int64 `json:"losses"`
	// CrashDeletions counts the nodes of crashed or silent predecessors
	// this replica deleted (Config.CrashProbe).
	CrashDeletions int64 `json:"crash_deletions"`
}

// Election is one replica's candidacy. Its methods are safe for concurrent
// use; Run may run once at a time.
type Election struct {
	client    *zkclient.Client
	path      string
	epochPath string
	beatPath  string
	data      []byte
	id        string // Identity.ID
	lossAfter time.Duration
	log       zerolog.Logger

	running atomic.Bool
	leading atomic.Bool

	mu   sync.Mutex
	term *termState // set while a term is being served, until its node is released

	candidacies, terms, resignations, losses atomic.Int64
	crashDeletions                           atomic.Int64
	crashProbe                               time.Duration

	// Seams for in-package tests: the GUID of each new candidacy, a call
	// just before the create request is sent, and a count of wake-ups by the
	// predecessor watch (to prove there is no herd).
	newGUID      func() string
	beforeCreate func()
	wakeups      atomic.Int64
	probes       atomic.Int64 // connects made by probe
}

// termState lets Resign reach the term being served.
type termState struct {
	resign     chan struct{} // closed by Resign
	resignOnce sync.Once
	released   chan struct{} // closed once the term's node is deleted (or known gone)
}

// New validates cfg and returns an Election ready to Run.
func New(cfg Config) (*Election, error) {
	if cfg.Client == nil {
		return nil, errors.New("election: Config.Client is nil")
	}
	if err := zkclient.ValidateRoot(cfg.Path); err != nil {
		return nil, fmt.Errorf("election: Config.Path: %w", err)
	}
	if cfg.Identity.ID == "" {
		return nil, errors.New("election: Config.Identity.ID is empty: each replica needs a unique id")
	}
	if cfg.LossFraction == 0 {
		cfg.LossFraction = DefaultLossFraction
	}
	if math.IsNaN(cfg.LossFraction) || cfg.LossFraction <= 0 || cfg.LossFraction > MaxLossFraction {
		return nil, fmt.Errorf("election: Config.LossFraction %v: must lie in (0, %v]", cfg.LossFraction, MaxLossFraction)
	}
	timeout := cfg.Client.SessionTimeout()
	if timeout <= 0 {
		return nil, fmt.Errorf("election: client session timeout %s: must be positive", timeout)
	}
	if lossAfter := time.Duration(float64(timeout) * cfg.LossFraction); lossAfter < 10*time.Millisecond {
		return nil, fmt.Errorf("election: session timeout %s × LossFraction %v = %s: too short to detect a loss in time", timeout, cfg.LossFraction, lossAfter)
	}
	data, err := json.Marshal(cfg.Identity)
	if err != nil {
		return nil, fmt.Errorf("election: encode identity: %w", err)
	}
	return &Election{
		client:     cfg.Client,
		path:       cfg.Path,
		epochPath:  cfg.Path + "-epoch",
		beatPath:   cfg.Path + "/" + beatName,
		data:       data,
		id:         cfg.Identity.ID,
		lossAfter:  time.Duration(float64(timeout) * cfg.LossFraction),
		log:        cfg.Logger.With().Str("component", "election").Str("id", cfg.Identity.ID).Logger(),
		newGUID:    uuid.NewString,
		crashProbe: max(cfg.CrashProbe, 0),
	}, nil
}

// IsLeader reports whether this replica leads now: true from just before
// lead is called until just before its context is cancelled.
func (e *Election) IsLeader() bool { return e.leading.Load() }

// Stats returns the transition counters.
func (e *Election) Stats() Stats {
	return Stats{
		Candidacies:    e.candidacies.Load(),
		Terms:          e.terms.Load(),
		Resignations:   e.resignations.Load(),
		Losses:         e.losses.Load(),
		CrashDeletions: e.crashDeletions.Load(),
	}
}

// Run campaigns until ctx is done. Whenever this replica becomes leader it
// calls lead(leaderCtx, term) and cancels leaderCtx the moment leadership is
// lost (see the package doc for when); lead must return promptly once
// leaderCtx is done, because the replica keeps its node, and so keeps the
// others waiting, until lead has returned. A lead that returns on its own
// resigns. After a term, and after any failure, Run rejoins with a fresh
// candidate node.
//
// Run returns nil once ctx is done and lead has returned, having deleted its
// node (it tries for up to a session timeout; a node it could not delete goes
// with the session). It returns an error early only when retrying cannot
// help: the ACL denies access, or another Run of this Election is running.
// Close the Client only after Run has returned.
func (e *Election) Run(ctx context.Context, lead func(ctx context.Context, term Term)) error {
	if lead == nil {
		return errors.New("election: Run: lead is nil")
	}
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer e.running.Store(false)

	pause := backoff.Policy{Initial: 50 * time.Millisecond, Max: max(e.lossAfter, 100*time.Millisecond)}
	failures := 0
	pathReady := false
	for ctx.Err() == nil {
		var err error
		if !pathReady {
			err = e.ensurePaths(ctx)
			pathReady = err == nil
		}
		if err == nil {
			err = e.campaign(ctx, lead)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case isFatal(err):
			return fmt.Errorf("election %s: %w", e.path, err)
		case errors.Is(err, zkclient.ErrNoNode):
			pathReady = false // the directory was deleted under us
		}
		switch {
		case errors.Is(err, ErrLeadReturned):
			// Not a failure, but a lead that returns at once would spin
			// through terms as fast as ZooKeeper allows.
		case err == nil || isLoss(err):
			failures = 0
			continue
		default:
			e.log.Warn().Err(err).Msg("election: campaign failed; retrying")
		}
		if pause.Wait(ctx, failures) != nil {
			return nil
		}
		failures++
	}
	return nil
}

// Resign gives up leadership at once: it cancels the leader context, waits
// for lead to return and for the candidate node to be deleted (so the next
// candidate takes over without waiting for a session timeout), and returns;
// Run then rejoins as a candidate, unless its context is done. It returns
// ErrNotLeader when this replica is not leading. Cancelling ctx stops the
// wait, not the resignation.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return ErrNotLeader
	}
	t.resignOnce.Do(func() { close(t.resign) })
	select {
	case <-t.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// campaign runs one candidacy: join, wait for its turn, lead, leave. It
// returns nil or a loss cause when the candidacy ended normally.
func (e *Election) campaign(ctx context.Context, lead func(context.Context, Term)) error {
	c := &candidate{guid: e.newGUID()}
	err := e.join(ctx, c)
	if err == nil {
		e.candidacies.Add(1)
		// The check comes before the join is logged, so that whoever
		// reads "joined" has seen any warning the join deserved.
		e.warnSharedID(ctx, c)
		e.logc(zerolog.InfoLevel, c).Int64("seq", c.seq).Msg("election: joined as candidate")
		if err = e.waitTurn(ctx, c); err == nil {
			err = e.serve(ctx, c, lead)
		}
	}
	e.leave(ctx, c)
	e.mu.Lock()
	if t := e.term; t != nil {
		close(t.released)
		e.term = nil
	}
	e.mu.Unlock()
	return err
}

// warnSharedID warns when another candidate publishes this replica's ID:
// two replicas started with the same --id (the default, the host name,
// is shared by replicas on one machine) cannot be told apart in the
// status, the handovers and the logs. Election does not need unique IDs,
// so it only warns. A read that fails is not worth a warning.
func (e *Election) warnSharedID(ctx context.Context, c *candidate) {
	children, err := call(ctx, e, func(s zkclient.Session) ([]string, error) {
		names, _, err := s.Children(ctx, e.path)
		return names, err
	})
	if err != nil {
		return
	}
	for _, other := range sortedCandidates(children) {
		p := e.path + "/" + other.name
		if p == c.node {
			continue
		}
		data, err := call(ctx, e, func(s zkclient.Session) ([]byte, error) {
			data, _, err := s.Get(ctx, p)
			return data, err
		})
		var id Identity
		if err != nil || json.Unmarshal(data, &id) != nil || id.ID != e.id {
			continue
		}
		e.logc(zerolog.WarnLevel, c).Str("other_node", p).Str("other_address", id.Address).
			Msgf("election: another replica uses the id %q too (at %s): give each replica its own id (--id, SEQKEEPER_ID; the default is the host name), or the status page, the handovers and the logs cannot tell them apart", id.ID, id.Address)
	}
}

// logc starts a log event with the candidate's fields.
func (e *Election) logc(level zerolog.Level, c *candidate) *zerolog.Event {
	return e.log.WithLevel(level).Str("session", fmt.Sprintf("0x%x", c.session)).Str("node", c.node)
}

// isLoss tells the errors that end a candidacy in the ordinary course of an
// election, after which Run rejoins at once.
func isLoss(err error) bool {
	for _, target := range []error{ErrNodeLost, ErrSessionLost, ErrContactLost, ErrResigned, ErrLeadReturned} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// ensurePaths creates the candidate directory and its parents.
func (e *Election) ensurePaths(ctx context.Context) error {
	if err := e.ready(ctx); err != nil {
		return err
	}
	return e.client.EnsurePath(ctx, e.path)
}

// call runs op on the client's session once it has one. Waiting for the
// session keeps requests from queueing up inside go-zookeeper while it is
// disconnected, to be sent in a burst on reconnection. op's own requests
// take ctx: a request already sent when ctx ends completes in the
// background.
func call[T any](ctx context.Context, e *Election, op func(s zkclient.Session) (T, error)) (T, error) {
	if err := e.ready(ctx); err != nil {
		var zero T
		return zero, err
	}
	return op(e.client.Session())
}

// ready waits until the client has a session.
func (e *Election) ready(ctx context.Context) error {
	if e.client.HasSession() {
		return nil
	}
	changes, stop := e.client.Changes()
	defer stop()
	// Poll as well: Changes only reports changes after the subscription.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !e.client.HasSession() {
		select {
		case <-changes:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// leafACL is the ACL of the znodes the election creates (candidates, the
// leader epoch): the election directory's, without CREATE and DELETE,
// which mean nothing on a leaf. So the directory's ACL, which an operator
// sets ('seqkeeper acl apply'), decides who may read and who may write
// them. Nil (the client's own ACL) when the directory's cannot be read.
func (e *Election) leafACL(ctx context.Context) []zkclient.ACL {
	acl, _, err := e.client.Session().GetACL(ctx, e.path)
	if err != nil || len(acl) == 0 {
		return nil
	}
	for i := range acl {
		acl[i].Perms &^= zkclient.PermCreate | zkclient.PermDelete
	}
	return acl
}
