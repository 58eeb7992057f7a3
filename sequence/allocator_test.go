package sequence_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

func TestAllocatorIsUniqueAcrossGoroutinesAndAllocators(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("alloc", seqzk.Registration{}, 100)
	e.raiser("alloc", 2000)

	l := testenv.NewLedger()
	ctx := context.Background()
	var wg sync.WaitGroup
	for a := 0; a < 3; a++ {
		alloc, err := sequence.NewAllocator(e.client(sequence.Options{}), "alloc",
			sequence.AllocatorOptions{InitialBatch: 7, MinBatch: 3, MaxBatch: 500, BatchDuration: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				worker := a*10 + g
				for i := 0; i < 2000; i++ {
					id, err := alloc.Next(ctx)
					if err != nil {
						t.Errorf("allocator %d: %v", a, err)
						return
					}
					l.Took(worker, sequence.Ranges{{Start: id, End: id}})
				}
			}()
		}
		defer func() {
			if err := alloc.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	l.Check(t)
}

func TestAllocatorClosePushesBackUnusedIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(sequence.Options{})
	ctx := context.Background()
	e.create("close", seqzk.Registration{}, 1000)
	alloc, err := sequence.NewAllocator(c, "close", sequence.AllocatorOptions{InitialBatch: 100, Prefetch: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 30; i++ {
		if id, err := alloc.Next(ctx); err != nil || id != i {
			t.Fatalf("Next = %d, %v; want %d", id, err, i)
		}
	}
	// Prefetch 0.9 means the second batch was fetched after the 11th ID.
	waitUntil(t, func() bool { return alloc.Stats().Batches == 2 })
	if err := alloc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alloc.Next(ctx); !errors.Is(err, sequence.ErrClosed) {
		t.Fatalf("Next after Close: err = %v; want ErrClosed", err)
	}
	st, _, err := c.Describe(ctx, "close")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Recycled.String(); got != "31:200" {
		t.Fatalf("recycled after Close = %q; want 31:200 (the rest of both batches)", got)
	}
	// A new allocator reuses them first.
	again, _ := sequence.NewAllocator(c, "close", sequence.AllocatorOptions{})
	defer again.Close(ctx)
	if id, err := again.Next(ctx); err != nil || id != 31 {
		t.Fatalf("Next on a new allocator = %d, %v; want 31", id, err)
	}
}

func TestAllocatorSurfacesFetchFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(sequence.Options{CeilingWait: 200 * time.Millisecond})
	ctx := context.Background()
	e.create("starved", seqzk.Registration{}, 5)
	alloc, err := sequence.NewAllocator(c, "starved", sequence.AllocatorOptions{InitialBatch: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close(ctx)
	for i := 0; i < 5; i++ {
		if _, err := alloc.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := alloc.Next(ctx); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, sequence.ErrCeilingReached) {
			t.Fatalf("Next past the ceiling: err = %v; want ErrCeilingReached", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Next hangs when the batch cannot be refilled")
	}
	// Once the primary raises the ceiling, the next call recovers.
	if _, err := e.admin().Keeper().Raise(ctx, "starved", 100); err != nil {
		t.Fatal(err)
	}
	if id, err := alloc.Next(ctx); err != nil || id != 6 {
		t.Fatalf("Next after the raise = %d, %v; want 6", id, err)
	}
}

func TestAllocatorAdaptsBatchSize(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(sequence.Options{})
	ctx := context.Background()
	e.create("adapt", seqzk.Registration{}, 1_000_000)
	alloc, err := sequence.NewAllocator(c, "adapt", sequence.AllocatorOptions{InitialBatch: 10, MaxBatch: 10_000, BatchDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close(ctx)
	for i := 0; i < 20_000; i++ {
		if _, err := alloc.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Batches that last far less than an hour double up to the maximum.
	if s := alloc.Stats(); s.BatchSize != 10_000 || s.Batches > 20 {
		t.Fatalf("after 20000 fast IDs: %+v; want batch size 10000 reached in few batches", s)
	}
}

func TestAllocatorOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, o := range []sequence.AllocatorOptions{
		{MinBatch: 10, InitialBatch: 5},
		{InitialBatch: 100, MaxBatch: 50},
		{Prefetch: 1.5},
		{Prefetch: -0.1},
		{BatchDuration: -time.Second},
	} {
		if _, err := sequence.NewAllocator(nil, "x", o); err == nil {
			t.Errorf("NewAllocator(%+v) accepted bad options", o)
		}
	}
}
