package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults for Options.
const (
	// DefaultMaxCount bounds the count of one ID request.
	DefaultMaxCount = 10_000
	// maxBody bounds a recycle request body.
	maxBody = 1 << 20
	// pushBackTimeout bounds returning the IDs of a request whose caller
	// went away.
	pushBackTimeout = 10 * time.Second
	// closeWorkers bounds the allocators Close pushes back at once.
	closeWorkers = 16
)

// Options configure a Server. Sequences is required, except on a Server
// of several roots (Roots); every other field may be left zero.
type Options struct {
	// Name is the root's name: the Server answers the rooted form of its
	// routes, /v1/roots/{Name}/..., besides the unrooted one (roots.go).
	// Empty: the unrooted form only.
	Name string
	// Roots makes a Server of several roots: it sends /v1/roots/{name}/...
	// to each root's Server, serves the process's routes (probes,
	// /metrics, the console, the OpenAPI document, and Status as
	// /v1/status), and answers the unrooted form of a root's route 404
	// root_required. Sequences, Admin, Allocator, MaxCount and
	// TopSequences are the roots' own then, and not used. The roots'
	// Servers are closed by Close, and take SetTokens's tokens.
	Roots []NamedServer
	// MetricLabels are added to every metric the Server registers (a
	// Server of one of several roots: root="name"), so that several
	// Servers can share one Registry.
	MetricLabels prometheus.Labels
	// Sequences takes and recycles IDs. Its CeilingWait bounds how long an
	// ID request waits at a sequence's ceiling before answering 503.
	Sequences *sequence.Client
	// ZooKeeper is not used: the Server reads and writes only through
	// Sequences.
	//
	// Deprecated: leave it nil; it will be removed.
	ZooKeeper *zkclient.Client
	// Status returns the body of GET /v1/status (this replica, the primary,
	// epoch, session, store health, runway), with the primary's sequences
	// that q asks for (ReserveViewOf does the choosing). Nil: the
	// allocators' state only (Server.Allocators).
	Status func(ctx context.Context, q StatusQuery) StatusView
	// Ready reports whether this replica should receive traffic (ZooKeeper
	// session up, store reachable); GET /readyz answers 503 with its error.
	// Nil: always ready.
	Ready func(ctx context.Context) error
	// Token, when not empty, is the bearer token every /v1 call and
	// /metrics must carry (Authorization: Bearer <token>). /healthz and
	// /readyz stay open for probes.
	Token string
	// AdminToken, when not empty, is the bearer token of the admin routes
	// (POST /v1/sequences, DELETE /v1/sequences/{name}); it works on every
	// other route too. It must differ from Token. Empty (or Admin nil):
	// the admin routes answer 403.
	AdminToken string
	// Tokens and AdminTokens add more tokens of each kind (a rotation
	// accepts the old and the new one for a while); SetTokens replaces
	// them all while the server runs.
	Tokens, AdminTokens []string
	// Admin carries out the admin routes.
	Admin *Operator
	// StepDown hands the root's leadership over when this replica leads
	// it (POST /v1/step-down, admin token): the next candidate leads and
	// this replica rejoins last. It returns false, nothing done, when the
	// replica does not lead. Nil: the route answers 409 not_primary.
	StepDown func(ctx context.Context) (bool, error)
	// Registry receives the API's metrics and is served on /metrics. Nil: a
	// private registry with the Go and process collectors. The caller owns
	// a registry it passes (and registers Go/process collectors itself).
	Registry *prometheus.Registry
	// Logger receives request failures. Zero value: disabled.
	Logger zerolog.Logger
	// Allocator configures the per-sequence allocators.
	Allocator sequence.AllocatorOptions
	// MaxCount bounds count in one ID request. Default DefaultMaxCount.
	MaxCount int64
	// TopSequences is how many sequences get /metrics series of their own:
	// the ones that served the most IDs. 0: sums only, so that the series
	// count does not grow with the number of sequences.
	TopSequences int
}

// Server is the HTTP ID API of one replica. It serves IDs from one
// in-memory sequence.Allocator per sequence (hi-lo), created on first use,
// so an ID request costs microseconds while the allocator has IDs. It is
// an http.Handler and safe for concurrent use.
//
// Call Close after the http.Server has shut down: it pushes every
// allocator's unused IDs back, so a graceful shutdown loses none.
type Server struct {
	seqs   *sequence.Client
	status func(context.Context, StatusQuery) StatusView
	ready  func(context.Context) error
	// hasToken and hasAdminToken say whether the taker's and the admin
	// routes need a token: fixed at start. tokens holds the accepted ones
	// (their SHA-256), which SetTokens replaces.
	hasToken, hasAdminToken bool
	tokens                  atomic.Pointer[tokenSet]
	admin                   *Operator
	stepDown                func(context.Context) (bool, error)
	maxCount                int64
	segments                segmentSizes
	allocOpt                sequence.AllocatorOptions
	log                     zerolog.Logger
	mux                     *http.ServeMux
	// paths maps a path pattern, whatever the method, to the 405 answer
	// listing its methods (see register).
	paths       *http.ServeMux
	promHandler http.Handler
	console     http.Handler // the status console's files
	metrics     *metrics

	draining atomic.Bool // Drain was called: /readyz answers 503
	topN     int
	// served and recycled count IDs over all sequences (for /metrics).
	served, recycled atomic.Int64
	// history samples the rate and runway for GET /v1/history.
	history *history

	// handed are the IDs this replica handed out, the only ones it takes
	// back (handed.go).
	handed *handedOut

	mu     sync.Mutex
	allocs map[string]*allocEntry
	closed bool

	// roots are the Servers rooted requests go to, by name: the roots of
	// a Server of several roots (rootServers, in their order), or this
	// Server itself under Options.Name.
	roots       map[string]*Server
	rootServers []NamedServer
}

// allocEntry is the allocator of one sequence.
type allocEntry struct {
	name   string
	alloc  *sequence.Allocator
	served atomic.Int64 // IDs handed out
	// bulk serialises requests for more than one ID, so that each gets a
	// contiguous run where the batches allow; single-ID requests do not
	// take it.
	bulk sync.Mutex
}

// New checks opts and returns a Server, or an error and no Server.
func New(opts Options) (*Server, error) {
	roots, err := newRootsServer(opts)
	if err != nil {
		return nil, err
	}
	multi := len(opts.Roots) > 0
	if opts.Sequences == nil && !multi {
		return nil, errors.New("httpapi: Options.Sequences is required")
	}
	if opts.MaxCount == 0 {
		opts.MaxCount = DefaultMaxCount
	}
	if opts.TopSequences < 0 {
		return nil, fmt.Errorf("httpapi: TopSequences %d must not be negative", opts.TopSequences)
	}
	if opts.MaxCount < 1 {
		return nil, fmt.Errorf("httpapi: MaxCount %d must be at least 1", opts.MaxCount)
	}
	taker, admin := opts.Tokens, opts.AdminTokens
	if opts.Token != "" {
		taker = append([]string{opts.Token}, taker...)
	}
	if opts.AdminToken != "" {
		admin = append([]string{opts.AdminToken}, admin...)
	}
	set, err := newTokenSet(taker, admin)
	if err != nil {
		return nil, err
	}
	if !multi {
		// Check the allocator options now rather than on the first request.
		probe, err := sequence.NewAllocator(opts.Sequences, "check", opts.Allocator)
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		_ = probe.Close(context.Background()) // it never took IDs: nothing to push
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{
		seqs:          opts.Sequences,
		status:        opts.Status,
		ready:         opts.Ready,
		hasToken:      len(taker) > 0,
		hasAdminToken: len(admin) > 0,
		admin:         opts.Admin,
		stepDown:      opts.StepDown,
		paths:         http.NewServeMux(),
		promHandler:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		maxCount:      opts.MaxCount,
		allocOpt:      opts.Allocator,
		log:           opts.Logger.With().Str("component", "httpapi").Logger(),
		mux:           http.NewServeMux(),
		allocs:        make(map[string]*allocEntry),
		handed:        newHandedOut(),
		topN:          opts.TopSequences,
		history:       newHistory(),
		console:       consoleHandler(),
		roots:         roots,
		rootServers:   slices.Clone(opts.Roots),
	}
	if opts.Name != "" && !multi {
		if err := validRootName(opts.Name); err != nil {
			return nil, err
		}
		s.roots = map[string]*Server{opts.Name: s}
	}
	m, err := newMetrics(prometheus.WrapRegistererWith(opts.MetricLabels, reg), s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.tokens.Store(set)

	s.register()
	return s, nil
}

// ServeHTTP routes the request. Every route, and the catch-all that
// answers unknown routes and methods in JSON, records its latency by route
// and status (see register).
// The first request starts the history sampling (history.start).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.history.start(s)
	s.mux.ServeHTTP(w, r)
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// fail writes err as an API error and logs server-side failures.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.failNamed(w, r, r.PathValue("name"), err)
}

// failNamed is fail for a sequence named elsewhere than in the path.
func (s *Server) failNamed(w http.ResponseWriter, r *http.Request, name string, err error) {
	status, code := classify(err)
	if status >= 500 {
		s.log.Warn().Err(err).Str("sequence", name).Str("code", code).Str("route", r.Pattern).Msg("request failed")
	}
	writeError(w, status, code, publicMessage(code, name, err))
}

// publicMessage is what a caller is told of err: the error itself where it
// speaks to the caller (a bad push, a ceiling reached), a fixed sentence
// where it would show internals (znode paths, server addresses, a stack
// of wrapped errors) that belong in the replica's log.
func publicMessage(code, name string, err error) string {
	switch code {
	case CodeUnknownSequence:
		return fmt.Sprintf("sequence %q does not exist: check its name (GET /v1/sequences lists them); an operator creates one with 'seqkeeper create %s' or POST /v1/sequences", name, name)
	case CodeZKUnavailable:
		return "this replica has no ZooKeeper session right now; retry, or use another replica"
	case CodeCorrupt:
		return fmt.Sprintf("the state of sequence %q cannot be read; an operator must repair it ('seqkeeper describe %s' shows it; the replica's log has the details)", name, name)
	case CodeInternal:
		return "internal error; the replica's log has the details"
	}
	return err.Error()
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(format, args...))
}

// AllocatorStatus is the state of one sequence's allocator on this replica.
type AllocatorStatus struct {
	Sequence  string `json:"sequence"`
	Batches   int64  `json:"batches"`
	BatchSize int64  `json:"batch_size"`
	Waits     int64  `json:"waits"`
	// Served counts the IDs this replica's API handed out of the sequence.
	Served int64 `json:"served"`
}

// Allocators returns the state of every allocator, sorted by sequence, for
// the caller's status page.
func (s *Server) Allocators() []AllocatorStatus {
	s.mu.Lock()
	entries := make([]*allocEntry, 0, len(s.allocs))
	for _, e := range s.allocs {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	out := make([]AllocatorStatus, 0, len(entries))
	for _, e := range entries {
		st := e.alloc.Stats()
		out = append(out, AllocatorStatus{Sequence: e.name, Batches: st.Batches, BatchSize: st.BatchSize, Waits: st.Waits, Served: e.served.Load()})
	}
	slices.SortFunc(out, func(a, b AllocatorStatus) int { return strings.Compare(a.Sequence, b.Sequence) })
	return out
}

// Drain makes GET /readyz answer 503 from now on while every other route
// keeps serving: the start of a graceful shutdown, so that load balancers
// stop sending requests before the listener closes.
func (s *Server) Drain() { s.draining.Store(true) }

// Close stops serving IDs (later ID requests answer 503 shutting_down) and
// pushes every allocator's unused IDs back to ZooKeeper, bounded by ctx.
// Call it after http.Server.Shutdown has waited for the requests in
// flight. IDs whose push fails are lost, never reused; Close returns the
// errors joined. It also stops the history sampling. Calling Close again
// does nothing.
func (s *Server) Close(ctx context.Context) error {
	s.history.close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.multi() {
		s.mu.Unlock()
		return s.closeRoots(ctx)
	}
	entries := make([]*allocEntry, 0, len(s.allocs))
	for _, e := range s.allocs {
		entries = append(entries, e)
	}
	s.mu.Unlock()

	errs := make([]error, len(entries))
	parallel.Each(len(entries), closeWorkers, func(i int) { errs[i] = entries[i].alloc.Close(ctx) })
	var pushed int64
	for _, e := range entries {
		pushed += e.alloc.Stats().PushedBack
	}
	s.log.Info().Int64("pushed_back_ids", pushed).Int("sequences", len(entries)).Msg("pushed back the unused IDs of every allocator")
	err := errors.Join(errs...)
	if err != nil {
		s.log.Error().Err(err).Msg("pushing back unused IDs at shutdown failed; those IDs are lost, never reused")
	}
	return err
}
