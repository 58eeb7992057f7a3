package batching

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// counter is a Source over one counter: Take hands out the next n IDs (in
// two ranges when n > 1, so batches of several ranges are served too) and
// Push records what comes back.
type counter struct {
	mu     sync.Mutex
	next   int64
	pushed []Range
	gate   chan struct{} // when set, Take waits for it, ignoring ctx
	fail   error         // when set, Take fails with it once
}

func (c *counter) source() Source {
	return Source{
		Take: func(ctx context.Context, n int64) ([]Range, error) {
			if c.gate != nil {
				<-c.gate
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := c.fail; err != nil {
				c.fail = nil
				return nil, err
			}
			first := c.next + 1
			c.next += n
			if n == 1 {
				return []Range{{first, first}}, nil
			}
			mid := first + n/2
			return []Range{{first, mid - 1}, {mid, c.next}}, nil
		},
		Push: func(ctx context.Context, ids []Range) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.pushed = append(c.pushed, ids...)
			return nil
		},
	}
}

func newAllocator(t *testing.T, c *counter, opts Options) *Allocator {
	t.Helper()
	a, err := New(opts, 1000, "test", c.source())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every ID taken is handed out by Next or pushed back by Close, once.
func TestEveryIDIsHandedOutOrPushedBackOnce(t *testing.T) {
	c := &counter{}
	a := newAllocator(t, c, Options{InitialBatch: 7, MinBatch: 3, MaxBatch: 500, BatchDuration: time.Millisecond})
	ctx := context.Background()
	seen := make(map[int64]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3000 {
				id, err := a.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[id]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v; want ErrClosed", err)
	}
	var pushed int64
	for _, r := range c.pushed {
		for id := r.Start; id <= r.End; id++ {
			seen[id]++
			pushed++
		}
	}
	for id := int64(1); id <= c.next; id++ {
		if seen[id] != 1 {
			t.Fatalf("ID %d handed out or pushed back %d times; want once", id, seen[id])
		}
	}
	if s := a.Stats(); s.PushedBack != pushed || len(seen) != int(c.next) {
		t.Fatalf("stats %+v, %d pushed, %d seen of %d taken", s, pushed, len(seen), c.next)
	}
}

// A batch that lands after Close stopped waiting for it goes back on its own.
func TestABatchLandingAfterCloseGoesBack(t *testing.T) {
	c := &counter{}
	a := newAllocator(t, c, Options{InitialBatch: 10})
	ctx := context.Background()
	if _, err := a.Next(ctx); err != nil {
		t.Fatal(err)
	}
	c.gate = make(chan struct{})
	for range 5 { // the sixth ID would start the prefetch
		if _, err := a.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := a.Close(short); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().PushedBack; got != 4 {
		t.Fatalf("Close pushed back %d IDs; want the 4 left of the first batch", got)
	}
	close(c.gate)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		pushed := append([]Range(nil), c.pushed...)
		c.mu.Unlock()
		if len(pushed) == 3 && pushed[1] == (Range{11, 15}) && pushed[2] == (Range{16, 20}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushed %v; want 7-10, then the late batch 11-20", pushed)
		}
	}
}

// A failed fetch is returned once, by the Next that waited for it; the next
// call fetches again.
func TestAFailedFetchIsReturnedOnce(t *testing.T) {
	boom := errors.New("boom")
	c := &counter{fail: boom}
	a := newAllocator(t, c, Options{})
	ctx := context.Background()
	defer a.Close(ctx)
	if _, err := a.Next(ctx); !errors.Is(err, boom) {
		t.Fatalf("Next = %v; want the fetch's error", err)
	}
	if id, err := a.Next(ctx); err != nil || id != 1 {
		t.Fatalf("Next after the failure = %d, %v; want 1", id, err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	for _, o := range []Options{
		{MinBatch: 10, InitialBatch: 5},
		{InitialBatch: 100, MaxBatch: 50},
		{Prefetch: 1.5},
		{BatchDuration: -time.Second},
	} {
		if _, err := New(o, 1000, "test", Source{}); err == nil {
			t.Errorf("New(%+v) accepted bad options", o)
		}
	}
}
