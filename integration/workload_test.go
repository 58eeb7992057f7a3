package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
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
	// Root of the Go workers' sequence clients; "" is the default root.
	// Worker binaries of v0.1.0 ignore it (see StartGoWorkerFrom).
	Root string
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
	httpIDs []string // every HTTP worker started, for WaitProgress
	races   []string // data race reports of worker processes (readRaces)
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
			w.StartHTTPWorker(fmt.Sprintf("http-%s-%d", r.Name, i), fixedEndpoint{r})
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
	envWorkerRoot    = "SEQKEEPER_CHAOS_WORKER_ROOT" // since v0.1.0
)

// StartGoWorker starts a Go worker process of kind "alloc" or "take" and
// returns its id.
func (w *Workload) StartGoWorker(kind string) (string, error) {
	return w.StartGoWorkerFrom(os.Args[0], "go", kind)
}

// StartGoWorkerFrom starts a Go worker process of kind "alloc" or "take"
// from binary, a test binary of this suite of any version since v0.1.0:
// its TestChaosWorkerProcess, configured by the SEQKEEPER_CHAOS_WORKER_*
// variables, is the protocol. The worker's id is prefix-kind-N. Binaries
// of v0.1.0 know no root variable and take from the default root.
func (w *Workload) StartGoWorkerFrom(binary, prefix, kind string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.serial++
	id := fmt.Sprintf("%s-%s-%d", prefix, kind, w.serial)
	seqs := append([]string(nil), w.opts.Sequences...)
	first := w.serial % len(seqs)
	seqs[0], seqs[first] = seqs[first], seqs[0]
	cmd := exec.Command(binary, "-test.run=^TestChaosWorkerProcess$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(),
		envWorker+"="+kind,
		envWorkerZK+"="+strings.Join(w.zk, ","),
		envWorkerSeqs+"="+strings.Join(seqs, ","),
		envWorkerSession+"="+w.opts.SessionTimeout.String(),
		envWorkerWait+"="+w.opts.CeilingWait.String(),
		envWorkerRoot+"="+w.opts.Root,
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start worker %s: %w", id, err)
	}
	gw := &goWorker{id: id, kind: kind, cmd: cmd, done: make(chan struct{})}
	w.workers[id] = gw
	go func() {
		defer close(gw.done)
		var pipes sync.WaitGroup
		pipes.Go(func() { w.readRaces(gw, errOut) })
		w.readWorker(gw, out)
		pipes.Wait()
		_ = cmd.Wait()
	}()
	return id, nil
}

// raceReportLines bounds the lines kept of one race report.
const raceReportLines = 200

// readRaces reads a worker process's standard error and keeps the data
// race reports in it (a worker is the test binary, built with -race when
// the suite is), recording each as a "race" event; Races returns them. The
// rest (go-zookeeper's log) is dropped.
func (w *Workload) readRaces(gw *goWorker, errOut io.Reader) {
	sc := bufio.NewScanner(errOut)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var report []string
	inReport := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "WARNING: DATA RACE"):
			inReport, report = true, []string{line}
		case inReport && strings.HasPrefix(line, "=================="):
			w.addRace(gw, report)
			inReport, report = false, nil
		case inReport && len(report) < raceReportLines:
			report = append(report, line)
		}
	}
	if inReport {
		w.addRace(gw, report) // cut short by the end of the process
	}
}

func (w *Workload) addRace(gw *goWorker, report []string) {
	text := strings.Join(report, "\n")
	w.hist.Event("race", gw.id, text)
	w.mu.Lock()
	w.races = append(w.races, gw.id+": "+text)
	w.mu.Unlock()
}

// Races returns every data race report of the Go worker processes so far,
// each prefixed with the worker's id, in the order they were read.
func (w *Workload) Races() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.races...)
}

// runPause ends an allocator's run of single IDs (readWorker): its calls
// follow each other within a millisecond or two.
const runPause = 100 * time.Millisecond

// readWorker turns a worker process's output lines into history. Single
// IDs that continue the previous range of the same sequence, in a call
// that started within runPause of the previous one's end, extend it (the
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
		// A run is calls back to back: a pause between two (a worker
		// descheduled on a loaded machine) ends it, so that a record's
		// length stays the time its calls took, never a pause.
		if run.ok && run.seq == m.Seq && r[0] == run.end+1 && t0.Sub(run.t1) < runPause {
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

// Endpoints choose the replica of each call of an HTTP worker.
type Endpoints interface {
	// Acquire returns the replica for the next call, or nil when none
	// serves now; Release(n) tells that the call to n has ended.
	Acquire(rng *rand.Rand) *Node
	Release(n *Node)
}

// fixedEndpoint is one replica, whatever its state.
type fixedEndpoint struct{ n *Node }

func (f fixedEndpoint) Acquire(*rand.Rand) *Node { return f.n }
func (fixedEndpoint) Release(*Node)              {}

// StartHTTPWorker starts an HTTP worker named id (its name must start
// with "http") that sends each call to the replica ep chooses, until the
// workload stops. WaitProgress waits for it.
func (w *Workload) StartHTTPWorker(id string, ep Endpoints) {
	w.mu.Lock()
	w.httpIDs = append(w.httpIDs, id)
	w.mu.Unlock()
	w.wg.Go(func() { w.runHTTP(id, ep) })
}

// runHTTP takes IDs through the HTTP API of the replicas ep chooses until
// the workload stops.
func (w *Workload) runHTTP(id string, ep Endpoints) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for w.ctx.Err() == nil {
		seq := w.opts.Sequences[rng.IntN(len(w.opts.Sequences))]
		r := ep.Acquire(rng)
		if r == nil {
			sleep(w.ctx, 50*time.Millisecond)
			continue
		}
		t0 := time.Now()
		ranges, code, err := w.takeHTTP(r, seq, 1+rng.IntN(50))
		t1 := time.Now()
		ep.Release(r)
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
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return nil, "http timeout", err
		}
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

// WaitProgress waits until every worker (every running Go worker and every
// HTTP worker) has completed a call that started after since: the system
// has recovered. The error lists the workers still stuck.
func (w *Workload) WaitProgress(ctx context.Context, since time.Time) error {
	return w.WaitProgressThrough(ctx, since, nil)
}

// WaitProgressThrough is WaitProgress where an HTTP worker's call counts
// only if replica via served it (nil: any replica), so that every HTTP
// worker has been served by a replica that just joined.
func (w *Workload) WaitProgressThrough(ctx context.Context, since time.Time, via *Node) error {
	want := map[string]bool{}
	for _, id := range w.GoWorkers() {
		want[id] = true
	}
	w.mu.Lock()
	for _, id := range w.httpIDs {
		want[id] = true
	}
	w.mu.Unlock()
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
			if !r.T0.Before(since) && (via == nil || r.Source == via.Name || !strings.HasPrefix(r.Worker, "http")) {
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
