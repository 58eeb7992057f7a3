package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/host"
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
		Args:        usageArgs(cobra.NoArgs),
		Annotations: map[string]string{annotationAllRoots: "true"},
		RunE:        func(cmd *cobra.Command, _ []string) error { return g.serve(cmd.Context()) },
	}
	g.bindSettings(cmd, serveSettings...)
	return cmd
}

// replica is everything one serve process runs: one ZooKeeper session,
// one HTTP listener, and the roots it hosts (host.Root), each with its own
// election, primary and store.
type replica struct {
	zk       *zkclient.Client
	roots    []*host.Root
	api      *httpapi.Server
	identity election.Identity
	// multi: the roots come from the config file's roots: list; their
	// routes are /v1/roots/{name}/... and their metrics carry root="name".
	multi bool
	// readyGrace is how long /readyz stays 200 without a ZooKeeper
	// session: the session timeout.
	readyGrace time.Duration
}

// serve is the serve command: it checks the settings, dials ZooKeeper,
// opens every root, serves the HTTP API and runs the roots' elections
// until a SIGINT or SIGTERM (or an election's failure), then shuts down.
func (g *globals) serve(ctx context.Context) error {
	cfg := g.cfg
	log := g.logger(zerolog.InfoLevel)
	if cfg.Store == "" && len(cfg.Roots) == 0 {
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
		readyGrace: cfg.ZKSessionTimeout, multi: len(cfg.Roots) > 0}
	log = log.With().Str("replica", cfg.ID).Logger()
	metrics := newServeMetrics()
	if r.zk, err = dialZKWithin(ctx, cfg, config.DefaultZKConnectTimeout, log, metrics.observeZK); err != nil {
		return err
	}
	defer r.zk.Close()
	if err := checkZooKeeperMode(ctx, r.zk, cfg.AllowStandaloneZooKeeper, log); err != nil {
		return err
	}
	if err := r.openRoots(ctx, cfg, log, metrics); err != nil {
		return err
	}
	if err := r.newAPI(cfg, tokens, adminTokens, metrics, log); err != nil {
		return err
	}
	go reloadTokens(ctx, cfg, r.api, log)
	srv, err := r.listen(cfg, tlsConfig, log)
	if err != nil {
		return err
	}
	return r.runRoots(ctx, stop, cfg, srv, log)
}

// listen listens on cfg.HTTP and serves r.api there in the background,
// with TLS when tlsConfig is set, and logs where and what it serves. It
// returns the server, for shutdown; a failure to listen says what to set.
func (r *replica) listen(cfg *config.Config, tlsConfig *tls.Config, log zerolog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for the HTTP API: %w (is another replica or program using it? set --http)", cfg.HTTP, err)
	}
	srv := &http.Server{Handler: r.api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig, ErrorLog: httpErrorLog(log)}
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
	serving := log.Info().Str("http", scheme+"://"+listeningAt(cfg.HTTP, ln.Addr())).Bool("client_certificates", cfg.HTTPTLSClientCAFile != "")
	if r.multi {
		serving = serving.Strs("roots", cfg.RootNames())
	} else {
		serving = serving.Str("store", r.roots[0].Store().String()).Str("root", cfg.Root)
	}
	serving.Str("session", fmt.Sprintf("0x%x", r.zk.SessionID())).Msg("serving")
	if cfg.LoopbackOnly() {
		log.Info().Msg("the HTTP API listens on loopback only: other hosts, containers and Kubernetes probes cannot reach it; set --http 0.0.0.0:7070 (with http_token_file or client certificates) to serve them")
	}
	return srv, nil
}

// runRoots runs every root's election (and, with several roots, spreads
// their primaries over the replicas) until ctx is done, then shuts down
// (see shutdown) and returns nil. If an election stops on its own, it
// returns that error; with several roots it first calls stop, so that the
// other roots hand over as at a SIGTERM, and shuts down.
func (r *replica) runRoots(ctx context.Context, stop context.CancelFunc, cfg *config.Config, srv *http.Server, log zerolog.Logger) error {
	elected := make(chan error, len(r.roots))
	for _, root := range r.roots {
		go func() { elected <- root.Run(ctx) }()
	}
	if len(r.roots) > 1 {
		go host.Spread(ctx, r.roots, host.SpreadOptions{Every: spreadEvery(cfg), Cooldown: spreadCooldown(cfg)}, log)
	}

	running := len(r.roots)
	select {
	case <-ctx.Done():
	case err := <-elected:
		running--
		if ctx.Err() == nil {
			log.Error().Err(err).Msg("leader election stopped")
			if r.multi {
				stop() // the other roots hand over, as at a SIGTERM
				r.shutdown(cfg, srv, running, elected, log)
			}
			return fmt.Errorf("leader election: %w", err)
		}
	}
	r.shutdown(cfg, srv, running, elected, log)
	log.Info().Msg("stopped")
	return nil
}

// shutdown drains HTTP, pushes buffered IDs back and waits for the
// running roots' elections to end (each deletes its candidate node: the
// next replica takes over at once). ctx is done.
func (r *replica) shutdown(cfg *config.Config, srv *http.Server, running int, elected <-chan error, log zerolog.Logger) {
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
	for ; running > 0; running-- {
		select {
		case <-elected: // Run deletes the candidate node when ctx is done
		case <-sctx.Done():
			log.Warn().Msg("leader election did not stop in time; the session close below ends it")
			return
		}
	}
}

// openRoots opens every root the configuration names: the one of root and
// store, or each of the roots: list, all on the one session.
func (r *replica) openRoots(ctx context.Context, cfg *config.Config, log zerolog.Logger, metrics *serveMetrics) error {
	type named struct {
		name string
		cfg  *config.Config
	}
	list := []named{{"", cfg}}
	if r.multi {
		list = list[:0]
		for _, name := range cfg.RootNames() {
			list = append(list, named{name, cfg.ForRoot(name)})
		}
	}
	for _, n := range list {
		root, err := host.Open(ctx, host.Config{Name: n.name, Settings: n.cfg, ZK: r.zk, Identity: r.identity, Logger: log, ObserveStore: metrics.observeStore})
		var ce *host.ConfigError
		if errors.As(err, &ce) {
			if n.name != "" {
				return usagef("root %s (%s): %w", n.name, n.cfg.Root, ce.Err)
			}
			return &usageError{ce.Err}
		}
		if err != nil {
			if n.name != "" {
				return fmt.Errorf("root %s (%s): %w", n.name, n.cfg.Root, err)
			}
			return err
		}
		reg := prometheus.Registerer(metrics.reg)
		if r.multi {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"root": n.name}, reg)
		}
		reg.MustRegister(r.collector(root, int(cfg.MetricsTopSequences)))
		r.roots = append(r.roots, root)
	}
	return nil
}

// newAPI builds the HTTP API: one httpapi.Server for a single root (which
// answers its rooted form too, under the root's default name), or one per
// root behind a Server of several roots.
func (r *replica) newAPI(cfg *config.Config, tokens, adminTokens []string, metrics *serveMetrics, log zerolog.Logger) error {
	rootAPI := func(root *host.Root, name string, labels prometheus.Labels) (*httpapi.Server, error) {
		api, err := httpapi.New(httpapi.Options{
			Name: name, Sequences: root.Workers(), Status: root.Status, Ready: r.ready,
			Tokens: tokens, AdminTokens: adminTokens, Registry: metrics.reg, MetricLabels: labels,
			Admin: root.Admin(), Logger: root.Logger(), TopSequences: int(cfg.MetricsTopSequences),
			StepDown: func(ctx context.Context) (bool, error) {
				err := root.Resign(ctx)
				if errors.Is(err, election.ErrNotLeader) {
					return false, nil
				}
				return err == nil, err
			},
		})
		if err == nil {
			root.SetAllocators(api.Allocators)
		}
		return api, err
	}
	var err error
	if !r.multi {
		r.api, err = rootAPI(r.roots[0], config.DefaultRootName(cfg.Root), nil)
		return err
	}
	named := make([]httpapi.NamedServer, 0, len(r.roots))
	for _, root := range r.roots {
		api, err := rootAPI(root, "", prometheus.Labels{"root": root.Name()})
		if err != nil {
			return err
		}
		named = append(named, httpapi.NamedServer{Name: root.Name(), Server: api})
	}
	// The process's own routes record their latency with root="" (no
	// root), beside the roots' series.
	r.api, err = httpapi.New(httpapi.Options{
		Roots: named, Status: r.status, Ready: r.ready, Tokens: tokens, AdminTokens: adminTokens,
		Registry: metrics.reg, MetricLabels: prometheus.Labels{"root": ""}, Logger: log,
	})
	return err
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

// status is the body of GET /v1/status of a replica of several roots:
// the process, and every root as GET /v1/roots/{name}/status answers.
func (r *replica) status(ctx context.Context, q httpapi.StatusQuery) httpapi.StatusView {
	s := httpapi.StatusView{
		Replica:          httpapi.ReplicaViewOf(r.identity),
		ZooKeeperSession: fmt.Sprintf("0x%x", r.zk.SessionID()),
		ZooKeeperState:   r.zk.State(),
		Store:            httpapi.StoreView{Healthy: true},
		Allocators:       []httpapi.AllocatorStatus{},
		Handovers:        []httpapi.HandoverView{},
	}
	for _, root := range r.roots {
		v := root.Status(ctx, q)
		s.Leading = s.Leading || v.Leading
		if !v.Store.Healthy && s.Store.Healthy {
			s.Store.Healthy, s.Store.Error = false, fmt.Sprintf("root %s: %s", root.Name(), v.Store.Error)
		}
		s.Roots = append(s.Roots, httpapi.RootStatusView{Name: root.Name(), Root: root.Settings().Root, StatusView: v})
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

// spreadEvery is how often a replica of several roots looks whether it
// leads more than its share of them (host.Spread).
func spreadEvery(*config.Config) time.Duration { return 2 * time.Second }

// spreadCooldown is the least time between two handovers by one replica,
// and after its start: one session timeout, in which a successor takes
// office and every replica sees it.
func spreadCooldown(cfg *config.Config) time.Duration { return cfg.ZKSessionTimeout }
