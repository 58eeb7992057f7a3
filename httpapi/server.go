package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

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

// Options configure a Server. Sequences and ZooKeeper are required; every
// other field may be left zero.
type Options struct {
	// Sequences takes and recycles IDs. Its CeilingWait bounds how long an
	// ID request waits at a sequence's ceiling before answering 503.
	Sequences *sequence.Client
	// ZooKeeper is the session Sequences uses; the list and describe
	// routes read through it.
	ZooKeeper *zkclient.Client
	// Status returns the body of GET /v1/status (this replica, the primary,
	// epoch, session, store health, runway), marshalled as JSON. Nil: the
	// allocators' state (Server.Allocators).
	Status func(ctx context.Context) any
	// Ready reports whether this replica should receive traffic (ZooKeeper
	// session up, store reachable); GET /readyz answers 503 with its error.
	// Nil: always ready.
	Ready func(ctx context.Context) error
	// Token, when not empty, is the bearer token every /v1 call and
	// /metrics must carry (Authorization: Bearer <token>). /healthz and
	// /readyz stay open for probes.
	Token string
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
}

// Server is the HTTP ID API of one replica. It serves IDs from one
// in-memory sequence.Allocator per sequence (hi-lo), created on first use,
// so an ID request costs microseconds while the allocator has IDs. It is
// an http.Handler and safe for concurrent use.
//
// Call Close after the http.Server has shut down: it pushes every
// allocator's unused IDs back, so a graceful shutdown loses none.
type Server struct {
	seqs     *sequence.Client
	zk       *zkclient.Client
	status   func(context.Context) any
	ready    func(context.Context) error
	token    [sha256.Size]byte
	hasToken bool
	maxCount int64
	allocOpt sequence.AllocatorOptions
	log      zerolog.Logger
	mux      *http.ServeMux
	metrics  *metrics

	mu     sync.Mutex
	allocs map[string]*allocEntry
	closed bool
}

// allocEntry is the allocator of one sequence.
type allocEntry struct {
	name  string
	alloc *sequence.Allocator
	// bulk serialises requests for more than one ID, so that each gets a
	// contiguous run where the batches allow; single-ID requests do not
	// take it.
	bulk sync.Mutex
}

// New checks opts and returns a Server, or an error and no Server.
func New(opts Options) (*Server, error) {
	if opts.Sequences == nil || opts.ZooKeeper == nil {
		return nil, errors.New("httpapi: Options.Sequences and Options.ZooKeeper are required")
	}
	if opts.MaxCount == 0 {
		opts.MaxCount = DefaultMaxCount
	}
	if opts.MaxCount < 1 {
		return nil, fmt.Errorf("httpapi: MaxCount %d must be at least 1", opts.MaxCount)
	}
	if strings.ContainsFunc(opts.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("httpapi: the token must not contain white space or control characters")
	}
	// Check the allocator options now rather than on the first request.
	probe, err := sequence.NewAllocator(opts.Sequences, "check", opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	_ = probe.Close(context.Background()) // it never took IDs: nothing to push
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{
		seqs:     opts.Sequences,
		zk:       opts.ZooKeeper,
		status:   opts.Status,
		ready:    opts.Ready,
		hasToken: opts.Token != "",
		token:    sha256.Sum256([]byte(opts.Token)),
		maxCount: opts.MaxCount,
		allocOpt: opts.Allocator,
		log:      opts.Logger.With().Str("component", "httpapi").Logger(),
		mux:      http.NewServeMux(),
		allocs:   make(map[string]*allocEntry),
	}
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m

	s.mux.Handle("POST /v1/sequences/{name}/ids", s.auth(http.HandlerFunc(s.handleIDs)))
	s.mux.Handle("POST /v1/sequences/{name}/recycle", s.auth(http.HandlerFunc(s.handleRecycle)))
	s.mux.Handle("GET /v1/sequences", s.auth(http.HandlerFunc(s.handleList)))
	s.mux.Handle("GET /v1/sequences/{name}", s.auth(http.HandlerFunc(s.handleDescribe)))
	s.mux.Handle("GET /v1/status", s.auth(http.HandlerFunc(s.handleStatus)))
	s.mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	return s, nil
}

// ServeHTTP routes the request, answers unknown routes and methods with
// JSON errors, and records the request's latency by route and status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	route := "unmatched"
	if h, pattern := s.mux.Handler(r); pattern == "" {
		// Not found or method not allowed: let the mux decide which (and
		// set Allow), but answer in JSON.
		probe := &probeWriter{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if allow := probe.header.Get("Allow"); allow != "" {
			sw.Header().Set("Allow", allow)
		}
		switch probe.code {
		case http.StatusMethodNotAllowed:
			writeError(sw, probe.code, CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, probe.header.Get("Allow")))
		default:
			writeError(sw, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no route %s %s; see docs/http-api.md", r.Method, r.URL.Path))
		}
	} else {
		route = pattern
		s.mux.ServeHTTP(sw, r)
	}
	s.metrics.observe(route, sw.code, time.Since(start))
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

// probeWriter captures the status and headers of the mux's own 404/405.
type probeWriter struct {
	header http.Header
	code   int
}

func (p *probeWriter) Header() http.Header         { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) { return len(b), nil }
func (p *probeWriter) WriteHeader(code int)        { p.code = code }

// auth requires the bearer token when one is configured. Comparing
// SHA-256 digests keeps the comparison constant-time whatever the lengths.
func (s *Server) auth(h http.Handler) http.Handler {
	if !s.hasToken {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="seqkeeper"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token: send 'Authorization: Bearer <token>' with the token the replica was started with (http_token)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fail writes err as an API error and logs server-side failures.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	if status >= 500 {
		s.log.Warn().Err(err).Str("sequence", r.PathValue("name")).Str("code", code).Str("route", r.Pattern).Msg("request failed")
	}
	writeError(w, status, code, err.Error())
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(format, args...))
}

// handleIDs serves POST /v1/sequences/{name}/ids?count=N.
func (s *Server) handleIDs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := sequence.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	count := int64(1)
	if q := r.URL.Query().Get("count"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 1 || n > s.maxCount {
			badRequest(w, "count %q: want a whole number from 1 to %d", q, s.maxCount)
			return
		}
		count = n
	}
	e, err := s.allocator(name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	got, err := s.pull(r.Context(), e, count)
	if err != nil {
		if errors.Is(err, sequence.ErrUnknownSequence) {
			s.drop(e)
		}
		s.fail(w, r, err)
		return
	}
	s.metrics.served.WithLabelValues(name).Add(float64(got.Count()))
	writeJSON(w, http.StatusOK, IDsResponse{Sequence: name, Ranges: IDRanges(got)})
}

// pull takes count IDs from e's allocator and returns them as ascending,
// coalesced ranges. When the allocator fails after handing out some IDs it
// returns those (fewer than count, as sequence.Client.Take does at the
// ceiling); if the caller has gone away it pushes them back instead.
func (s *Server) pull(ctx context.Context, e *allocEntry, count int64) (sequence.Ranges, error) {
	if count > 1 {
		e.bulk.Lock()
		defer e.bulk.Unlock()
	}
	var got []sequence.Range
	var n int64
	for ; n < count; n++ {
		id, err := e.alloc.Next(ctx)
		if err != nil {
			if n == 0 {
				return nil, err
			}
			if ctx.Err() != nil {
				s.pushBack(ctx, e.name, got, err)
				return nil, err
			}
			s.log.Info().Err(err).Str("sequence", e.name).Int64("count", count).Int64("handed_out", n).Msg("answering with fewer IDs than asked")
			break
		}
		if k := len(got) - 1; k >= 0 && got[k].End+1 == id {
			got[k].End = id
		} else {
			got = append(got, sequence.Range{Start: id, End: id})
		}
	}
	rs, err := sequence.NormalizeRanges(got)
	if err != nil {
		// The allocator handed out one ID twice: never pass that on.
		return nil, fmt.Errorf("sequence %q: allocator returned overlapping IDs (a bug; please report it): %v", e.name, err)
	}
	return rs, nil
}

// pushBack returns IDs that were taken for a caller who went away.
func (s *Server) pushBack(ctx context.Context, name string, ids []sequence.Range, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushBackTimeout)
	defer cancel()
	if err := s.seqs.Push(ctx, name, ids); err != nil {
		s.log.Warn().Err(err).Str("sequence", name).Int("ranges", len(ids)).Msg("could not push back the IDs of an abandoned request; they are lost, never reused")
		return
	}
	s.log.Debug().AnErr("cause", cause).Str("sequence", name).Msg("pushed back the IDs of an abandoned request")
}

// allocator returns the allocator of sequence name, creating it.
func (s *Server) allocator(name string) (*allocEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errShuttingDown
	}
	if e := s.allocs[name]; e != nil {
		return e, nil
	}
	a, err := sequence.NewAllocator(s.seqs, name, s.allocOpt)
	if err != nil {
		return nil, err
	}
	e := &allocEntry{name: name, alloc: a}
	s.allocs[name] = e
	return e, nil
}

// drop forgets the allocator of a sequence that does not exist, so that
// requests for made-up names do not accumulate allocators. It does not
// close it: a concurrent request still using it would get ErrClosed (503)
// instead of its own answer. An allocator that never took a batch holds no
// goroutine and no IDs.
func (s *Server) drop(e *allocEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.allocs[e.name] == e {
		delete(s.allocs, e.name)
	}
}

// IdempotencyKeyHeader is the request header of POST
// /v1/sequences/{name}/recycle that names one logical push (see
// sequence.ValidatePushKey), so that a retry after a timeout is answered
// definitively instead of recycling the IDs twice.
const IdempotencyKeyHeader = "Idempotency-Key"

// handleRecycle serves POST /v1/sequences/{name}/recycle. The IDs go back
// to the sequence in ZooKeeper (sequence.Client.Push, or PushOnce with an
// Idempotency-Key), never into this replica's allocator, and the push
// refuses IDs that were never issued or are already recycled.
func (s *Server) handleRecycle(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := sequence.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	keys, keyed := r.Header[http.CanonicalHeaderKey(IdempotencyKeyHeader)]
	key := ""
	if keyed {
		if len(keys) != 1 {
			badRequest(w, "%s: %d headers; send exactly one", IdempotencyKeyHeader, len(keys))
			return
		}
		key = keys[0]
		if err := sequence.ValidatePushKey(key); err != nil {
			badRequest(w, "%s: %v", IdempotencyKeyHeader, err)
			return
		}
	}
	var body IDsResponse
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		badRequest(w, `body: want {"ranges":[[start,end],...]}: %v`, err)
		return
	}
	if dec.More() {
		badRequest(w, "body: one JSON object expected, found more")
		return
	}
	if body.Sequence != "" && body.Sequence != name {
		badRequest(w, "body names sequence %q but the URL names %q", body.Sequence, name)
		return
	}
	if len(body.Ranges) == 0 {
		badRequest(w, `body: "ranges" is empty: nothing to recycle`)
		return
	}
	ids := sequence.Ranges(body.Ranges)
	already := false
	var err error
	if keyed {
		already, err = s.seqs.PushOnce(r.Context(), name, key, ids)
	} else {
		err = s.seqs.Push(r.Context(), name, ids)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n := ids.Count()
	if !already {
		s.metrics.recycled.WithLabelValues(name).Add(float64(n))
	}
	writeJSON(w, http.StatusOK, RecycleResponse{Sequence: name, Recycled: n, AlreadyApplied: already})
}

// handleList serves GET /v1/sequences.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	list, err := ListSequences(r.Context(), s.zk, s.seqs.Root())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []SequenceSummary{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sequences": list})
}

// handleDescribe serves GET /v1/sequences/{name}.
func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request) {
	d, err := DescribeSequence(r.Context(), s.zk, s.seqs.Root(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleStatus serves GET /v1/status.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if s.status == nil {
		writeJSON(w, http.StatusOK, map[string]any{"allocators": s.Allocators()})
		return
	}
	writeJSON(w, http.StatusOK, s.status(r.Context()))
}

// handleReady serves GET /readyz.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	var err error
	switch {
	case closed:
		err = errShuttingDown
	case s.ready != nil:
		err = s.ready(r.Context())
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

// AllocatorStatus is the state of one sequence's allocator on this replica.
type AllocatorStatus struct {
	Sequence  string `json:"sequence"`
	Batches   int64  `json:"batches"`
	BatchSize int64  `json:"batch_size"`
	Waits     int64  `json:"waits"`
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
		out = append(out, AllocatorStatus{Sequence: e.name, Batches: st.Batches, BatchSize: st.BatchSize, Waits: st.Waits})
	}
	slices.SortFunc(out, func(a, b AllocatorStatus) int { return strings.Compare(a.Sequence, b.Sequence) })
	return out
}

// Close stops serving IDs (later ID requests answer 503 shutting_down) and
// pushes every allocator's unused IDs back to ZooKeeper, bounded by ctx.
// Call it after http.Server.Shutdown has waited for the requests in
// flight. IDs whose push fails are lost, never reused; Close returns the
// errors joined. Calling Close again does nothing.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	entries := make([]*allocEntry, 0, len(s.allocs))
	for _, e := range s.allocs {
		entries = append(entries, e)
	}
	s.mu.Unlock()

	errs := make([]error, len(entries))
	sem := make(chan struct{}, closeWorkers)
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = e.alloc.Close(ctx)
		}()
	}
	wg.Wait()
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
