// Package host runs one root of a serve process: its sequence clients, its
// store, its election and its primary, on a ZooKeeper session the process
// shares among all the roots it hosts. 'seqkeeper serve' runs one Root per
// root of its configuration (one, or the config file's roots: list).
package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ConfigError marks an error the configuration causes (a store of another
// root, a path another root claimed, a bad setting): serve exits 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Config is what one Root needs.
type Config struct {
	// Name is the root's name in URLs and metric labels; "" for the one
	// root of a single-root process.
	Name string
	// Settings is the root's configuration: its root, store, paths and
	// the shared settings (config.Config.ForRoot, or the whole
	// configuration of a single root). Open settles its paths in it.
	Settings *config.Config
	// ZK is the process's session, shared by every root.
	ZK *zkclient.Client
	// Identity is this replica in the root's election.
	Identity election.Identity
	// Logger receives the root's log lines (a "root" field is added for
	// a named root).
	Logger zerolog.Logger
	// ObserveStore, when set, times every store request.
	ObserveStore func(op string, d time.Duration)
}

// Root is one root hosted by a serve process.
type Root struct {
	name     string
	cfg      *config.Config
	zk       *zkclient.Client
	seqs     *seqzk.Client
	workers  *sequence.Client
	store    *persist.Store
	election *election.Election
	primary  *primary.Primary
	admin    *httpapi.Operator
	identity election.Identity
	log      zerolog.Logger
	// handovers are the last changes of primary this replica observed.
	handovers Handovers
	// allocators returns the HTTP API's allocators of this root, for the
	// status; set by SetAllocators.
	allocators func() []httpapi.AllocatorStatus
}

// Open prepares a root: it opens and checks the store (which must be this
// root's, in a format this build reads), settles the election and marker
// paths and claims them for the root, and builds the election and the
// primary. Nothing runs until Run. Errors the configuration causes are a
// *ConfigError.
func Open(ctx context.Context, hc Config) (*Root, error) {
	cfg := hc.Settings
	log := hc.Logger
	if hc.Name != "" {
		log = log.With().Str("root_name", hc.Name).Logger()
	}
	if cfg.Store == "" {
		return nil, &ConfigError{errors.New("serve needs a store for the ceilings: set --store (s3://bucket/prefix?endpoint=URL or file:///path) or SEQKEEPER_STORE")}
	}
	r := &Root{name: hc.Name, cfg: cfg, zk: hc.ZK, identity: hc.Identity, log: log}
	var err error
	layout, err := cfg.Layout()
	if err != nil {
		return nil, &ConfigError{err}
	}
	if r.seqs, err = seqzk.NewClient(hc.ZK, seqzk.Options{Root: cfg.Root, CeilingWait: cfg.CeilingWait, Layout: layout}); err != nil {
		return nil, &ConfigError{err}
	}
	open := persist.OpenOptions{Create: cfg.CreateBucket, CreateWait: StoreStartWait, Logger: &log}
	if r.store, err = OpenStore(ctx, cfg, open, hc.Identity.Version); err != nil {
		return nil, err
	}
	// One root per store, election and marker: a second root sharing one
	// would share its primary, or mix its records into this root's.
	switch err := r.store.Check(ctx); {
	case errors.Is(err, persist.ErrOtherRoot):
		return nil, &ConfigError{fmt.Errorf("store: %w", err)}
	case errors.Is(err, persist.ErrNewerFormat):
		// A rollback past a store format change: refuse at the start,
		// not once elected, so that the operator sees it at once and
		// the replica never reports itself ready.
		// The error names the release that wrote the format when the
		// store records it (persist.NewerFormatError), and says what to
		// run.
		return nil, &ConfigError{fmt.Errorf("store: %w (a rollback past a store format change is not possible; CHANGELOG.md names the store formats of each release)", err)}
	}
	if err := SettlePaths(ctx, cfg, r.seqs, log); err != nil {
		return nil, err
	}
	if err := ClaimPaths(ctx, cfg, r.seqs); err != nil {
		return nil, err
	}
	log.Info().Str("root", cfg.Root).Str("election_path", cfg.ElectionPath).Str("marker_path", cfg.MarkerPath).Msg("serve: the root's election and cluster marker")
	if hc.ObserveStore != nil {
		r.store.ObserveRequests(hc.ObserveStore)
	}
	r.election, err = election.New(election.Config{Client: hc.ZK, Path: cfg.ElectionPath, Identity: hc.Identity, CrashProbe: cfg.CrashProbe, Logger: log})
	if err != nil {
		return nil, &ConfigError{err}
	}
	r.primary, err = primary.New(cfg.Primary, primary.Deps{Sequences: r.seqs, Store: r.store, Holder: cfg.ID, ElectionPath: cfg.ElectionPath, Logger: log})
	if err != nil {
		return nil, &ConfigError{err}
	}
	// The HTTP API serves workers: it gets a client without the primary's
	// powers.
	if r.workers, err = sequence.NewClient(hc.ZK, sequence.Options{Root: cfg.Root, CeilingWait: cfg.CeilingWait}); err != nil {
		return nil, &ConfigError{err}
	}
	r.admin = &httpapi.Operator{Sequences: r.seqs, Store: r.store}
	return r, nil
}

// StoreStartWait is how long serve, creating its bucket at the start,
// waits for an S3 endpoint that does not answer yet (a MinIO starting
// beside it, or its pod being replaced), as it waits for ZooKeeper
// (zk_connect_timeout): see persist.S3Config.CreateWait.
const StoreStartWait = 30 * time.Second

// OpenStore opens the store named by cfg.Store for cfg.Root. With
// opts.Create, a missing bucket or directory is created (serve); the
// operator commands never create one, so a typo fails instead of reading
// an empty store. A bad URL is a *ConfigError. release names this build in
// the store (persist.StoreOptions.Release).
func OpenStore(ctx context.Context, cfg *config.Config, opts persist.OpenOptions, release string) (*persist.Store, error) {
	b, err := persist.Open(ctx, cfg.Store, opts)
	if err != nil {
		if errors.Is(err, persist.ErrBadURL) {
			return nil, &ConfigError{err}
		}
		return nil, err
	}
	// The release is recorded when this build moves the store's formats
	// on, and named when it refuses a newer one (persist.NewerFormatError).
	return persist.NewStore(b, persist.StoreOptions{Root: cfg.Root, Release: release})
}

// Name is the root's name ("" for the one root of a single-root process).
func (r *Root) Name() string { return r.name }

// Settings is the root's configuration, its paths settled.
func (r *Root) Settings() *config.Config { return r.cfg }

// Workers is the sequence client of the HTTP API: a worker's powers.
func (r *Root) Workers() *sequence.Client { return r.workers }

// Admin carries out the root's admin routes.
func (r *Root) Admin() *httpapi.Operator { return r.admin }

// Store is the root's store.
func (r *Root) Store() *persist.Store { return r.store }

// Election is the root's election.
func (r *Root) Election() *election.Election { return r.election }

// Primary is the root's primary (running only while this replica leads).
func (r *Root) Primary() *primary.Primary { return r.primary }

// Logger is the root's logger.
func (r *Root) Logger() zerolog.Logger { return r.log }

// SetAllocators gives the status the HTTP API's allocators of this root.
func (r *Root) SetAllocators(f func() []httpapi.AllocatorStatus) { r.allocators = f }

// Run keeps the store's health known, records the changes of primary, and
// campaigns in the root's election, leading with the primary whenever
// elected, until ctx is done. It returns nil then, having left the
// election (its candidate node deleted: the next replica takes over at
// once); earlier only when the election cannot go on.
func (r *Root) Run(ctx context.Context) error {
	go r.keepStoreHealthKnown(ctx, storeHealthEvery)
	go r.handovers.Watch(ctx, r.election)
	return r.election.Run(ctx, r.lead)
}

// Resign hands the root's leadership over at once, by the path a SIGTERM
// takes: the primary's context ends, it returns, the candidate node is
// deleted and the next candidate leads; this replica rejoins as the last
// candidate. election.ErrNotLeader when it does not lead.
func (r *Root) Resign(ctx context.Context) error { return r.election.Resign(ctx) }

// lead is the election callback: run the primary for as long as leadership
// lasts. If the primary fails (fenced, or cannot start), returning gives
// leadership up; a pause first keeps a broken replica from spinning.
func (r *Root) lead(ctx context.Context, term election.Term) {
	log := r.log.With().Int64("term_epoch", term.Epoch).Str("node", term.Node).Logger()
	log.Info().Msg("elected primary")
	err := r.primary.Run(ctx)
	if err == nil || ctx.Err() != nil {
		return
	}
	log.Error().Err(err).Msg("primary failed; giving up leadership")
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
}

// storeHealthEvery is how often a replica that made no store request of
// its own (a standby, or an idle primary) checks the store, so that its
// status and metrics say whether it could take over. One GET a minute.
const storeHealthEvery = time.Minute

// storeCheckTimeout bounds that check.
const storeCheckTimeout = 10 * time.Second

// keepStoreHealthKnown checks the store whenever no request has been made
// for every, until ctx ends. Probes and status pages read Health, never
// the store.
func (r *Root) keepStoreHealthKnown(ctx context.Context, every time.Duration) {
	check := func() {
		cctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
		defer cancel()
		_ = r.store.Check(cctx) // the outcome lands in Health
	}
	check()
	t := time.NewTicker(every / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if time.Since(r.store.Health().Last()) >= every {
				check()
			}
		}
	}
}

// Status is the root's part of GET /v1/status (httpapi.StatusView: the
// JSON contract lives with the API).
func (r *Root) Status(ctx context.Context, q httpapi.StatusQuery) httpapi.StatusView {
	s := httpapi.StatusView{
		Replica:          httpapi.ReplicaViewOf(r.identity),
		Leading:          r.election.IsLeader(),
		ZooKeeperSession: fmt.Sprintf("0x%x", r.zk.SessionID()),
		ZooKeeperState:   r.zk.State(),
		Store:            r.StoreStatus(),
		Election:         httpapi.ElectionViewOf(r.election.Stats()),
		Allocators:       []httpapi.AllocatorStatus{},
		Handovers:        r.handovers.List(),
	}
	if r.allocators != nil {
		s.Allocators = r.allocators()
	}
	if id, err := r.election.Leader(ctx); err == nil {
		p := httpapi.ReplicaViewOf(id)
		s.Primary = &p
	}
	if s.Leading {
		v := httpapi.ReserveViewFrom(r.primary.StatusOf, q)
		s.Reserve = &v
	}
	return s
}

// StoreStatus is the store's health as its last requests found it (by
// the primary's work, or by keepStoreHealthKnown).
func (r *Root) StoreStatus() httpapi.StoreView {
	h := r.store.Health()
	s := httpapi.StoreView{URL: r.store.String(), Healthy: h.Healthy()}
	if last := h.Last(); !last.IsZero() {
		s.LastRequest = &last
	}
	switch {
	case !s.Healthy && h.LastError != nil:
		s.Error = h.LastError.Error()
	case !s.Healthy:
		s.Error = "not asked yet"
	}
	return s
}
