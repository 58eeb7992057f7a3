package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestChaosWorkerProcess is not a test: it is the body of the Go worker
// processes the chaos suite starts (the test binary, run again with
// SEQKEEPER_CHAOS_WORKER set). SIGTERM ends it cleanly.
func TestChaosWorkerProcess(t *testing.T) {
	if os.Getenv(envWorker) == "" {
		t.Skip("the body of the chaos suite's worker processes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunWorkerProcess(ctx, os.Stdout); err != nil {
		t.Fatal(err)
	}
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
	client, err := sequence.NewClient(zc, sequence.Options{Root: os.Getenv(envWorkerRoot), CeilingWait: wait})
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
