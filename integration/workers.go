package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// WorkloadOptions say what a Workload runs.
type WorkloadOptions struct {
	// Sequences the workers take from; each worker picks one at random
	// per call (allocators stay with one).
	Sequences []string
	// Allocators and Takers are the Go workers, each with its own
	// ZooKeeper session: Allocators serve single IDs from a
	// sequence.Allocator, Takers call Client.Take with random counts.
	Allocators, Takers int
	// HTTPPerReplica is the number of HTTP workers per replica.
	HTTPPerReplica int
	// SessionTimeout of the Go workers' ZooKeeper sessions.
	SessionTimeout time.Duration
	// CeilingWait of the Go workers' sequence clients.
	CeilingWait time.Duration
}

// Workload runs the chaos suite's workers and the primary monitor against a
// cluster, recording everything in a History.
type Workload struct {
	hist    *History
	cluster *Cluster
	zk      []string // ZooKeeper addresses for the Go workers
	opts    WorkloadOptions
	http    *http.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*goWorker
	serial  int
}

// goWorker is one Go worker: a process of its own (the test binary
// running TestChaosWorkerProcess), so that a crash is a real SIGKILL and
// go-zookeeper runs outside the test process.
type goWorker struct {
	id   string
	kind string
	cmd  *exec.Cmd
	done chan struct{} // closed when its output is read to the end
}

// NewWorkload starts the workers and the monitor; they run until Stop.
// zkAddrs are the addresses the Go workers dial (a ZooKeeperProxy's).
func NewWorkload(c *Cluster, hist *History, zkAddrs []string, opts WorkloadOptions) (*Workload, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Workload{
		hist: hist, cluster: c, zk: zkAddrs, opts: opts,
		http:    &http.Client{Timeout: 8 * time.Second},
		ctx:     ctx,
		cancel:  cancel,
		workers: map[string]*goWorker{},
	}
	for range opts.Allocators {
		if _, err := w.StartGoWorker("alloc"); err != nil {
			w.Stop()
			return nil, err
		}
	}
	for range opts.Takers {
		if _, err := w.StartGoWorker("take"); err != nil {
			w.Stop()
			return nil, err
		}
	}
	for _, r := range c.Replicas() {
		for i := range opts.HTTPPerReplica {
			id := fmt.Sprintf("http-%s-%d", r.Name, i)
			w.wg.Go(func() { w.runHTTP(id, r) })
		}
	}
	w.wg.Go(w.monitor)
	return w, nil
}

// Stop shuts every worker down cleanly (SIGTERM: allocators push their
// unused IDs back) and waits for them.
func (w *Workload) Stop() {
	w.mu.Lock()
	workers := make([]*goWorker, 0, len(w.workers))
	for _, gw := range w.workers {
		workers = append(workers, gw)
	}
	w.workers = map[string]*goWorker{}
	w.mu.Unlock()
	for _, gw := range workers {
		_ = gw.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, gw := range workers {
		select {
		case <-gw.done:
		case <-time.After(15 * time.Second):
			_ = gw.cmd.Process.Kill()
			<-gw.done
		}
	}
	w.cancel()
	w.wg.Wait()
}

// Environment of a worker process.
const (
	envWorker        = "SEQKEEPER_CHAOS_WORKER" // kind: alloc or take
	envWorkerZK      = "SEQKEEPER_CHAOS_WORKER_ZK"
	envWorkerSeqs    = "SEQKEEPER_CHAOS_WORKER_SEQS" // the allocator's is the first
	envWorkerSession = "SEQKEEPER_CHAOS_WORKER_SESSION"
	envWorkerWait    = "SEQKEEPER_CHAOS_WORKER_CEILING_WAIT"
)

// StartGoWorker starts a Go worker process of kind "alloc" or "take" and
// returns its id.
func (w *Workload) StartGoWorker(kind string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.serial++
	id := fmt.Sprintf("go-%s-%d", kind, w.serial)
	seqs := append([]string(nil), w.opts.Sequences...)
	first := w.serial % len(seqs)
	seqs[0], seqs[first] = seqs[first], seqs[0]
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaosWorkerProcess$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(),
		envWorker+"="+kind,
		envWorkerZK+"="+strings.Join(w.zk, ","),
		envWorkerSeqs+"="+strings.Join(seqs, ","),
		envWorkerSession+"="+w.opts.SessionTimeout.String(),
		envWorkerWait+"="+w.opts.CeilingWait.String(),
		// The race detector also instruments the worker; go-zookeeper's
		// known race on lastZxid must not stop it.
		"GORACE=halt_on_error=0",
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start worker %s: %w", id, err)
	}
	gw := &goWorker{id: id, kind: kind, cmd: cmd, done: make(chan struct{})}
	w.workers[id] = gw
	go func() {
		defer close(gw.done)
		w.readWorker(gw, out)
		_ = cmd.Wait()
	}()
	return id, nil
}

// readWorker turns a worker process's output lines into history. Single
// IDs that continue the previous range of the same sequence extend it (the
// allocator reports every ID); a run is recorded at a break, after 200 ms
// or 1000 IDs, and when the output ends.
func (w *Workload) readWorker(gw *goWorker, out io.Reader) {
	var run struct {
		seq        string
		start, end int64
		t0, t1     time.Time
		ok         bool
	}
	flush := func() {
		if run.ok {
			w.hist.Add(run.seq, gw.id, gw.id, run.t0, run.t1, [][2]int64{{run.start, run.end}})
			run.ok = false
		}
	}
	defer flush()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), workerLinePrefix)
		if !ok {
			continue // the testing package's own output
		}
		var m workerLine
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			continue
		}
		if m.Error != "" {
			flush()
			w.hist.Event("error", gw.id, m.Error)
			continue
		}
		t0, t1 := time.Unix(0, m.T0), time.Unix(0, m.T1)
		if len(m.Ranges) != 1 {
			flush()
			w.hist.Add(m.Seq, gw.id, gw.id, t0, t1, m.Ranges)
			continue
		}
		r := m.Ranges[0]
		if run.ok && run.seq == m.Seq && r[0] == run.end+1 {
			run.end, run.t1 = r[1], t1
		} else {
			flush()
			run.seq, run.start, run.end, run.t0, run.t1, run.ok = m.Seq, r[0], r[1], t0, t1, true
		}
		if run.end-run.start >= 999 || run.t1.Sub(run.t0) > 200*time.Millisecond {
			flush()
		}
	}
}

// CrashGoWorker kills a Go worker of the kind given ("" for any) at random
// with SIGKILL: its session ends without a goodbye and its allocator's
// buffered IDs are never pushed back. It returns the worker's id and kind,
// once the process is gone and its output read.
func (w *Workload) CrashGoWorker(rng *rand.Rand, kind string) (id, killedKind string) {
	w.mu.Lock()
	var ids []string
	for id, gw := range w.workers {
		if kind == "" || gw.kind == kind {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		w.mu.Unlock()
		return "", ""
	}
	gw := w.workers[ids[rng.IntN(len(ids))]]
	delete(w.workers, gw.id)
	w.mu.Unlock()
	_ = gw.cmd.Process.Kill()
	<-gw.done
	w.hist.Event("crash", gw.id, "worker process killed (SIGKILL) mid-batch")
	return gw.id, gw.kind
}

// GoWorkers returns the ids of the running Go workers.
func (w *Workload) GoWorkers() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for id := range w.workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// workerLinePrefix starts every line a worker process reports on.
const workerLinePrefix = "CHAOS "

// workerLine is one report of a worker process: ranges received by one
// call (or allocator run), or a failed call.
type workerLine struct {
	Seq    string     `json:"seq,omitempty"`
	Ranges [][2]int64 `json:"ranges,omitempty"`
	T0     int64      `json:"t0,omitempty"`
	T1     int64      `json:"t1,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// workerSink writes a worker's reports, one line each, to its stdout.
type workerSink struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *workerSink) add(seq string, t0, t1 time.Time, ranges [][2]int64) {
	s.put(workerLine{Seq: seq, Ranges: ranges, T0: t0.UnixNano(), T1: t1.UnixNano()})
}

func (s *workerSink) fail(kind string) { s.put(workerLine{Error: kind}) }

func (s *workerSink) put(l workerLine) {
	b, _ := json.Marshal(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	// One write per line, so that a SIGKILL never leaves half a line.
	_, _ = s.w.Write(append(append([]byte(workerLinePrefix), b...), '\n'))
}

// RunWorkerProcess is the life of a worker process, configured by its
// environment: dial its own session, then take IDs until ctx ends (SIGTERM),
// then close cleanly. Every range received is reported on out before it
// is used, so a SIGKILL loses no report of an ID handed out.
func RunWorkerProcess(ctx context.Context, out io.Writer) error {
	kind := os.Getenv(envWorker)
	servers := strings.Split(os.Getenv(envWorkerZK), ",")
	seqs := strings.Split(os.Getenv(envWorkerSeqs), ",")
	session, err := time.ParseDuration(os.Getenv(envWorkerSession))
	if err != nil {
		return fmt.Errorf("%s: %w", envWorkerSession, err)
	}
	wait, err := time.ParseDuration(os.Getenv(envWorkerWait))
	if err != nil {
		return fmt.Errorf("%s: %w", envWorkerWait, err)
	}
	sink := &workerSink{w: out}
	var zc *zkclient.Client
	for zc == nil {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		c, err := zkclient.Dial(dctx, servers, zkclient.Options{SessionTimeout: session})
		cancel()
		if err == nil {
			zc = c
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		sink.fail("dial")
		sleep(ctx, time.Second)
	}
	defer zc.Close()
	client, err := sequence.NewClient(zc, sequence.Options{CeilingWait: wait})
	if err != nil {
		return err
	}
	if kind == "alloc" {
		return runAllocator(ctx, client, seqs[0], sink)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	for ctx.Err() == nil {
		seq := seqs[rng.IntN(len(seqs))]
		ok := sink.call(ctx, seq, func(cctx context.Context) ([][2]int64, error) {
			rs, err := client.Take(cctx, seq, 1+rng.Int64N(100))
			return toPairs(rs), err
		})
		if ok {
			sleep(ctx, 20*time.Millisecond)
		}
	}
	return nil
}

// call makes one call of a worker, bounded by 10 s, and reports the IDs
// it got with its start and end times, or its failure (and then pauses a
// little). It reports whether the call succeeded.
func (s *workerSink) call(ctx context.Context, seq string, take func(context.Context) ([][2]int64, error)) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t0 := time.Now()
	ranges, err := take(cctx)
	t1 := time.Now()
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.fail(errorKind(err))
			sleep(ctx, 100*time.Millisecond)
		}
		return false
	}
	s.add(seq, t0, t1, ranges)
	return true
}

// runAllocator takes single IDs from an Allocator and reports each one
// before taking the next, so that a SIGKILL loses no report of an ID the
// worker received (the parent coalesces them into runs). When ctx ends it
// closes the allocator, pushing its unused IDs back.
func runAllocator(ctx context.Context, client *sequence.Client, seq string, sink *workerSink) error {
	a, err := sequence.NewAllocator(client, seq, sequence.AllocatorOptions{
		InitialBatch: 50, MinBatch: 10, MaxBatch: 5000, BatchDuration: time.Second,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = a.Close(cctx)
		cancel()
	}()
	for ctx.Err() == nil {
		ok := sink.call(ctx, seq, func(cctx context.Context) ([][2]int64, error) {
			id, err := a.Next(cctx)
			return [][2]int64{{id, id}}, err
		})
		if ok {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// runHTTP takes IDs from one replica's HTTP API until the workload stops.
func (w *Workload) runHTTP(id string, r *Node) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for w.ctx.Err() == nil {
		seq := w.opts.Sequences[rng.IntN(len(w.opts.Sequences))]
		t0 := time.Now()
		ranges, code, err := w.takeHTTP(r, seq, 1+rng.IntN(50))
		t1 := time.Now()
		if err != nil {
			if w.ctx.Err() == nil {
				w.hist.Event("error", id, code)
				sleep(w.ctx, 200*time.Millisecond)
			}
			continue
		}
		w.hist.Add(seq, id, r.Name, t0, t1, ranges)
		sleep(w.ctx, 50*time.Millisecond)
	}
}

// takeHTTP asks replica r for count IDs; on failure code names the error
// ("http 503 ceiling_reached", "unreachable").
func (w *Workload) takeHTTP(r *Node, seq string, count int) ([][2]int64, string, error) {
	addr := r.Addr(ReplicaPort)
	if addr == "" {
		return nil, "no address", errors.New("no address")
	}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/sequences/%s/ids?count=%d", addr, seq, count), nil)
	if err != nil {
		return nil, "request", err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return nil, "http unreachable", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		// The answer may have held IDs: they are lost, not reused.
		return nil, "http body lost", err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		kind := fmt.Sprintf("http %d %s", resp.StatusCode, e.Error.Code)
		if resp.StatusCode == http.StatusInternalServerError {
			// Unexpected: keep the message as evidence.
			kind += ": " + e.Error.Message
		}
		return nil, kind, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var ids struct {
		Ranges [][2]int64 `json:"ranges"`
	}
	if err := json.Unmarshal(body, &ids); err != nil {
		return nil, "http bad body", err
	}
	return ids.Ranges, "", nil
}

// replicaStatus is the part of GET /v1/status the suite reads.
type replicaStatus struct {
	Leading bool `json:"leading"`
	Reserve *struct {
		Sequences []struct {
			Name          string  `json:"name"`
			StoredCeiling int64   `json:"stored_ceiling"`
			Rate          float64 `json:"rate_per_second"`
		} `json:"sequences"`
	} `json:"reserve"`
}

// monitor polls every replica's status four times a second.
func (w *Workload) monitor() {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		s, stored := w.poll(client)
		w.hist.AddSample(s, stored)
	}
}

// poll asks every replica for its status at once.
func (w *Workload) poll(client *http.Client) (Sample, map[string]int64) {
	replicas := w.cluster.Replicas()
	type answer struct {
		name string
		st   *replicaStatus
	}
	answers := make(chan answer, len(replicas))
	for _, r := range replicas {
		go func() {
			st, err := getStatus(w.ctx, client, r)
			if err != nil {
				st = nil
			}
			answers <- answer{r.Name, st}
		}()
	}
	s := Sample{T: time.Now()}
	stored := map[string]int64{}
	for range replicas {
		a := <-answers
		if a.st == nil {
			continue
		}
		s.Reachable++
		if a.st.Leading {
			s.Leaders = append(s.Leaders, a.name)
			if a.st.Reserve != nil {
				for _, seq := range a.st.Reserve.Sequences {
					stored[seq.Name] = seq.StoredCeiling
					if s.Rates == nil {
						s.Rates = map[string]float64{}
					}
					s.Rates[seq.Name] = seq.Rate
				}
			}
		}
	}
	sort.Strings(s.Leaders)
	if len(stored) > 0 {
		s.Stored = stored
	}
	return s, stored
}

func getStatus(ctx context.Context, client *http.Client, r *Node) (*replicaStatus, error) {
	addr := r.Addr(ReplicaPort)
	if addr == "" {
		return nil, errors.New("no address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st replicaStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Primary waits until exactly one reachable replica says it leads and
// returns it.
func (w *Workload) Primary(ctx context.Context) (*Node, error) {
	client := &http.Client{Timeout: time.Second}
	for {
		var leaders []*Node
		for _, r := range w.cluster.Replicas() {
			if st, err := getStatus(ctx, client, r); err == nil && st.Leading {
				leaders = append(leaders, r)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no single primary (%d replicas say they lead): %w", len(leaders), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// StoredCeilings returns the stored ceilings the primary reports now.
func (w *Workload) StoredCeilings(ctx context.Context) (map[string]int64, error) {
	p, err := w.Primary(ctx)
	if err != nil {
		return nil, err
	}
	st, err := getStatus(ctx, &http.Client{Timeout: 2 * time.Second}, p)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if st.Reserve != nil {
		for _, s := range st.Reserve.Sequences {
			out[s.Name] = s.StoredCeiling
		}
	}
	return out, nil
}

// WaitProgress waits until every worker (every running Go worker and every
// HTTP worker) has completed a call that started after since, and a
// primary is known: the system has recovered. The error lists the workers
// still stuck.
func (w *Workload) WaitProgress(ctx context.Context, since time.Time) error {
	want := map[string]bool{}
	for _, id := range w.GoWorkers() {
		want[id] = true
	}
	for _, r := range w.cluster.Replicas() {
		for i := range w.opts.HTTPPerReplica {
			want[fmt.Sprintf("http-%s-%d", r.Name, i)] = true
		}
	}
	for {
		stuck := map[string]bool{}
		for id := range want {
			stuck[id] = true
		}
		w.hist.mu.Lock()
		for i := len(w.hist.records) - 1; i >= 0 && len(stuck) > 0; i-- {
			r := w.hist.records[i]
			if r.T1.Before(since) {
				break
			}
			if !r.T0.Before(since) {
				delete(stuck, r.Worker)
			}
		}
		w.hist.mu.Unlock()
		// A worker crashed meanwhile is not waited for.
		running := map[string]bool{}
		for _, id := range w.GoWorkers() {
			running[id] = true
		}
		for id := range stuck {
			if strings.HasPrefix(id, "go-") && !running[id] {
				delete(stuck, id)
			}
		}
		if len(stuck) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var ids []string
			for id := range stuck {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			return fmt.Errorf("workers made no progress since %s: %s: %w", since.Format("15:04:05.000"), strings.Join(ids, ", "), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// errorKind names an error of the sequence library for the figures.
func errorKind(err error) string {
	switch {
	case errors.Is(err, sequence.ErrCeilingReached):
		return "ceiling_reached"
	case errors.Is(err, sequence.ErrUnvalidated):
		return "unvalidated"
	case errors.Is(err, sequence.ErrRecreated):
		return "recreated"
	case errors.Is(err, sequence.ErrUnknownSequence):
		return "unknown_sequence"
	case errors.Is(err, zkclient.ErrNoSession):
		return "no_session"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return "other: " + msg
}

func toPairs(rs sequence.Ranges) [][2]int64 {
	out := make([][2]int64, len(rs))
	for i, r := range rs {
		out[i] = [2]int64{r.Start, r.End}
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
