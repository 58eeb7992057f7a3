package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/admin"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// keyAllowStandalone is the setting that lets serve run on a standalone
// ZooKeeper.
const keyAllowStandalone = "allow_standalone_zookeeper"

// shutdownTimeout bounds a graceful shutdown: draining HTTP, pushing back
// buffered IDs, and handing leadership over.
const shutdownTimeout = 20 * time.Second

func newServeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a replica: leader election, the primary's reservation loop, the HTTP ID API",
		Long: `Run a seqkeeper replica. Every replica joins the leader election and serves
the HTTP ID API; the one elected primary keeps a reserved ceiling ahead of
every sequence, writes each ceiling to the store before ZooKeeper may hold
it, and restores sequences ZooKeeper lost. SIGTERM or SIGINT: stop serving,
push buffered IDs back, hand leadership over at once, exit 0.

ZooKeeper must run in quorum mode (standaloneEnabled=false, even with one
server): serve refuses a standalone server (exit 2), on which a rollback of
ZooKeeper's data goes unseen, unless --allow-standalone-zookeeper is given.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return g.serve(cmd.Context()) },
	}
	g.bindSettings(cmd, serveSettings...)
	return cmd
}

// replica is everything one serve process runs.
type replica struct {
	zk       *zkclient.Client
	store    *persist.Store
	election *election.Election
	primary  *primary.Primary
	api      *httpapi.Server
	identity election.Identity
	// handovers are the last changes of primary this replica observed.
	handovers handovers
	// readyGrace is how long /readyz stays 200 without a ZooKeeper
	// session: the session timeout.
	readyGrace time.Duration
}

func (g *globals) serve(ctx context.Context) error {
	cfg := g.cfg
	log := g.logger(zerolog.InfoLevel)
	if cfg.Store == "" {
		return usagef("serve needs a store for the ceilings: set --store (s3://bucket/prefix?endpoint=URL or file:///path) or SEQKEEPER_STORE")
	}
	tokens, err := cfg.BearerTokens()
	if err != nil {
		return &usageError{err}
	}
	adminTokens, err := cfg.AdminTokens()
	if err != nil {
		return &usageError{err}
	}
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	r := &replica{identity: election.Identity{ID: cfg.ID, Address: cfg.AdvertiseAddr(), Version: buildVersion()},
		readyGrace: cfg.ZKSessionTimeout}
	log = log.With().Str("replica", cfg.ID).Logger()
	metrics := newServeMetrics()
	if r.zk, err = dialZKWithin(ctx, cfg, config.DefaultZKConnectTimeout, log, metrics.observeZK); err != nil {
		return err
	}
	defer r.zk.Close()
	if err := checkZooKeeperMode(ctx, r.zk, cfg.AllowStandaloneZooKeeper, log); err != nil {
		return err
	}
	seqs, err := newSequenceClient(r.zk, cfg)
	if err != nil {
		return &usageError{err}
	}
	if r.store, err = openStore(ctx, cfg, cfg.CreateBucket); err != nil {
		return err
	}
	// One root per store, election and marker: a second root sharing one
	// would share its primary, or mix its records into this root's.
	switch err := r.store.Check(ctx); {
	case errors.Is(err, persist.ErrOtherRoot):
		return &usageError{fmt.Errorf("store: %w", err)}
	case errors.Is(err, persist.ErrNewerFormat):
		// A rollback past a store format change: refuse at the start,
		// not once elected, so that the operator sees it at once and
		// the replica never reports itself ready. The error names the
		// release that wrote the format when the store records it
		// (persist.NewerFormatError), and says what to run.
		return &usageError{fmt.Errorf("store: %w (a rollback past a store format change is not possible; CHANGELOG.md names the store formats of each release)", err)}
	}
	if err := settlePaths(ctx, cfg, seqs, log); err != nil {
		return err
	}
	if err := refuseUnknownElection(ctx, cfg, seqs); err != nil {
		return err
	}
	log.Info().Str("root", cfg.Root).Str("election_path", cfg.ElectionPath).Str("marker_path", cfg.MarkerPath).Msg("serve: the root's election and cluster marker")
	for _, c := range []struct{ path, what string }{{cfg.ElectionPath, "election_path"}, {cfg.MarkerPath, "marker_path"}} {
		if err := seqs.Claim(ctx, c.path, c.what); err != nil {
			if errors.Is(err, seqzk.ErrClaimed) {
				return &usageError{err}
			}
			return err
		}
	}
	r.store.ObserveRequests(metrics.observeStore)
	r.election, err = election.New(election.Config{Client: r.zk, Path: cfg.ElectionPath, Identity: r.identity, Logger: log})
	if err != nil {
		return &usageError{err}
	}
	r.primary, err = primary.New(cfg.Primary, primary.Deps{Sequences: seqs, Store: r.store, Holder: cfg.ID, Logger: log})
	if err != nil {
		return &usageError{err}
	}

	reg := metrics.reg
	reg.MustRegister(r.collector(int(cfg.MetricsTopSequences)))
	// The HTTP API serves workers: it gets a client without the primary's
	// powers.
	workers, err := sequence.NewClient(r.zk, sequence.Options{Root: cfg.Root, CeilingWait: cfg.CeilingWait})
	if err != nil {
		return &usageError{err}
	}
	r.api, err = httpapi.New(httpapi.Options{
		Sequences: workers, Status: r.status, Ready: r.ready,
		Tokens: tokens, AdminTokens: adminTokens, Registry: reg,
		Admin: &admin.Service{Sequences: seqs, Store: r.store}, Logger: log, TopSequences: int(cfg.MetricsTopSequences),
	})
	if err != nil {
		return err
	}
	go reloadTokens(ctx, cfg, r.api, log)
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listen on %s for the HTTP API: %w (is another replica or program using it? set --http)", cfg.HTTP, err)
	}
	srv := &http.Server{Handler: r.api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}
	go func() {
		var err error
		if tlsConfig != nil {
			err = srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server failed")
		}
	}()
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info().Str("http", scheme+"://"+listeningAt(cfg.HTTP, ln.Addr())).Bool("client_certificates", cfg.HTTPTLSClientCAFile != "").
		Str("store", r.store.String()).Str("root", cfg.Root).
		Str("session", fmt.Sprintf("0x%x", r.zk.SessionID())).Msg("serving")
	if cfg.LoopbackOnly() {
		log.Info().Msg("the HTTP API listens on loopback only: other hosts, containers and Kubernetes probes cannot reach it; set --http 0.0.0.0:7070 (with http_token_file or client certificates) to serve them")
	}
	go r.keepStoreHealthKnown(ctx, storeHealthEvery)
	go r.handovers.watch(ctx, r.election)

	elected := make(chan error, 1)
	go func() { elected <- r.election.Run(ctx, r.lead(log)) }()

	select {
	case <-ctx.Done():
	case err := <-elected:
		if ctx.Err() == nil {
			log.Error().Err(err).Msg("leader election stopped")
			return fmt.Errorf("leader election: %w", err)
		}
	}
	if cfg.ShutdownDelay > 0 {
		// Unready first, still serving: endpoints are removed before
		// connections are refused.
		r.api.Drain()
		log.Info().Int64("shutdown_delay_ms", cfg.ShutdownDelay.Milliseconds()).Msg("shutting down: /readyz now answers 503; serving on until the delay ends")
		time.Sleep(cfg.ShutdownDelay)
	}
	log.Info().Msg("shutting down: draining HTTP, pushing back buffered IDs, handing over leadership")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
	}
	if err := r.api.Close(sctx); err != nil {
		log.Warn().Err(err).Msg("pushing back buffered IDs failed; they are lost, never reused")
	}
	select {
	case <-elected: // Run deletes the candidate node when ctx is done
	case <-sctx.Done():
		log.Warn().Msg("leader election did not stop in time; the session close below ends it")
	}
	log.Info().Msg("stopped")
	return nil
}

// listeningAt is the address serve listens at as the operator wrote it
// (0.0.0.0 stays 0.0.0.0, where the listener would say [::]), with the
// port the listener got (for port 0).
func listeningAt(configured string, got net.Addr) string {
	host, _, err1 := net.SplitHostPort(configured)
	_, port, err2 := net.SplitHostPort(got.String())
	if err1 != nil || err2 != nil {
		return got.String()
	}
	return net.JoinHostPort(host, port)
}

// checkZooKeeperMode refuses a standalone ZooKeeper unless allow is set.
// seqkeeper detects a rollback of ZooKeeper's data (a restore from an older
// copy) by the new epoch the leader election after it starts; a standalone
// server never holds one, so there a rollback goes unseen and IDs handed
// out since the copy would be handed out again. When the mode cannot be
// told (the /zookeeper/config znode unreadable and srvr unanswered), serve
// warns and runs: refusing would stop a quorum-mode ensemble that merely
// hides its mode, and the operator is told what to check.
func checkZooKeeperMode(ctx context.Context, zc *zkclient.Client, allow bool, log zerolog.Logger) error {
	mode, why := zkclient.DetectMode(ctx, zc)
	servers := strings.Join(zc.Servers(), ",")
	log = log.With().Str("zookeeper_mode", mode.String()).Str("zookeeper_mode_evidence", why).Logger()
	switch mode {
	case zkclient.ModeQuorum:
		log.Info().Msg("zookeeper runs in quorum mode: a rollback of its data starts a new epoch, which the primary detects")
		return nil
	case zkclient.ModeStandalone:
		if !allow {
			return usagef("ZooKeeper %s runs in standalone mode (%s). A standalone server never holds a leader election, "+
				"so its epoch never changes: if its data is restored from an older copy, seqkeeper cannot see the rollback "+
				"and IDs handed out since the copy will be handed out again. Run ZooKeeper in quorum mode "+
				"(standaloneEnabled=false and a server.1= line in zoo.cfg; one server is enough), or accept that risk "+
				"with --%s (%s=true, or '%s: true' in the config file)",
				servers, why, config.FlagName(keyAllowStandalone), config.EnvName(keyAllowStandalone), keyAllowStandalone)
		}
		log.Warn().Msgf("zookeeper %s runs in standalone mode and %s is set: a rollback of ZooKeeper's data "+
			"(a restore from an older copy) goes unseen, and IDs handed out since the copy will be handed out again; "+
			"run ZooKeeper in quorum mode (standaloneEnabled=false and a server.1= line, even for one server) to close this",
			servers, keyAllowStandalone)
		return nil
	}
	log.Warn().Msgf("cannot tell whether zookeeper %s runs in quorum mode; serving anyway. If it runs standalone "+
		"(standaloneEnabled=true with one server), a rollback of its data goes unseen and IDs can be handed out twice: "+
		"check with 'echo srvr | nc HOST PORT' (want Mode: leader or follower, not standalone)", servers)
	return nil
}

// lead is the election callback: run the primary for as long as leadership
// lasts. If the primary fails (fenced, or cannot start), returning gives
// leadership up; a pause first keeps a broken replica from spinning.
func (r *replica) lead(log zerolog.Logger) func(context.Context, election.Term) {
	return func(ctx context.Context, term election.Term) {
		log := log.With().Int64("term_epoch", term.Epoch).Str("node", term.Node).Logger()
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
func (r *replica) keepStoreHealthKnown(ctx context.Context, every time.Duration) {
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

// status is the body of GET /v1/status (httpapi.StatusView: the JSON
// contract lives with the API).
func (r *replica) status(ctx context.Context, q httpapi.StatusQuery) httpapi.StatusView {
	s := httpapi.StatusView{
		Replica:          httpapi.ReplicaViewOf(r.identity),
		Leading:          r.election.IsLeader(),
		ZooKeeperSession: fmt.Sprintf("0x%x", r.zk.SessionID()),
		ZooKeeperState:   r.zk.State(),
		Store:            r.storeStatus(),
		Election:         httpapi.ElectionViewOf(r.election.Stats()),
		Allocators:       r.api.Allocators(),
		Handovers:        r.handovers.list(),
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

// storeStatus is the store's health as its last requests found it (by
// the primary's work, or by keepStoreHealthKnown).
func (r *replica) storeStatus() httpapi.StoreView {
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

// ready says whether this replica can hand out IDs now. Without a
// ZooKeeper session it serves what its allocators hold and its session
// may still come back (as it does through a ZooKeeper leader election),
// so it stays ready for up to the session timeout; after that the session
// is gone or going. The store plays no part: only the primary writes it,
// every replica would fail alike, and IDs flow from the reserves while it
// is down (its health is on /v1/status and /metrics, for alerts).
func (r *replica) ready(context.Context) error {
	if d := r.zk.DisconnectedFor(); d >= r.readyGrace {
		return fmt.Errorf("no zookeeper session for %s (ready for up to %s without one)", d.Round(time.Millisecond), r.readyGrace)
	}
	return nil
}
