package persist_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/persist"
)

// A delete reads the sequence's ceiling, the primary raises it (store
// first), and the tombstone lands with the ceiling delete read. The
// tombstone must take all the same, keeping the raised ceiling, or a
// restore brings the deleted sequence back; and a tombstone never buries
// an incarnation born above it.
func TestTombstoneBeatsARacingRaise(t *testing.T) {
	t.Parallel()
	b, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hooked := &hookBackend{Backend: b}
	s, err := persist.NewStore(hooked, persist.StoreOptions{Buckets: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ep, err := s.AdvanceEpoch(ctx, "primary")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, ep, persist.Record{Name: "s", Ceiling: 100, Live: 1, Czxid: 7, Mzxid: 9}); err != nil {
		t.Fatal(err)
	}
	// The primary raises many times while delete tombstones what it read.
	var wg sync.WaitGroup
	wg.Go(func() {
		for c := int64(200); c <= 2000; c += 100 {
			if err := s.Put(ctx, ep, persist.Record{Name: "s", Ceiling: c, Czxid: 7, Mzxid: 9 + c}); err != nil {
				t.Error(err)
			}
		}
	})
	got, err := tombstone(ctx, s, "s", 100)
	wg.Wait()
	if err != nil || !got.Deleted() {
		t.Fatalf("tombstone: %+v, %v", got, err)
	}
	final, err := s.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !final.Deleted() || final.Ceiling != 2000 {
		t.Fatalf("after the raises: %+v; want a tombstone with ceiling 2000", final)
	}

	// A newer incarnation is born above the tombstone just before it
	// lands: the tombstone does not delete it.
	if err := s.Put(ctx, ep, persist.Record{Name: "t", Ceiling: 500, Live: 1, Czxid: 20, Mzxid: 21}); err != nil {
		t.Fatal(err)
	}
	other, err := persist.NewStore(b, persist.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	birth := func() {
		if err := other.Put(ctx, ep, persist.Record{Name: "t", Ceiling: 900, Live: 501, Czxid: 30, Mzxid: 31}); err != nil {
			t.Error(err)
		}
	}
	hooked.once.Store(&birth)
	if got, err := tombstone(ctx, s, "t", 500); err != nil || got.Deleted() {
		t.Fatalf("tombstone racing a birth: %+v, %v; want the newer incarnation live", got, err)
	}
}

// tombstone records in s that name is deleted up to ceiling, as a delete
// does once ZooKeeper has deleted it, and returns the record s then holds.
func tombstone(ctx context.Context, s *persist.Store, name string, ceiling int64) (persist.Record, error) {
	dead := max(ceiling, 1)
	epoch, _, err := s.Epoch(ctx)
	if err != nil {
		return persist.Record{}, err
	}
	if err := s.Put(ctx, epoch, persist.Record{Name: name, Ceiling: dead, Dead: dead}); err != nil {
		return persist.Record{}, err
	}
	return s.Get(ctx, name)
}

// hookBackend runs a function, once armed, before the next write of a log
// segment reaches the backend.
type hookBackend struct {
	persist.Backend
	once atomic.Pointer[func()]
}

func (h *hookBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if strings.HasPrefix(key, "log/") {
		if fn := h.once.Swap(nil); fn != nil {
			(*fn)()
		}
	}
	return h.Backend.Put(ctx, key, data, ifMatch)
}

// A write that changes nothing (the store already holds as much) must not
// vouch for a deposed writer from its cache: it reads the bucket, which
// its successor's seal marked, and is fenced. Otherwise a deposed primary
// could go on to act in ZooKeeper on a floor below its successor's
// ceilings.
func TestNoOpPutOfADeposedWriterIsFenced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *persist.Store {
		b, err := persist.NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The epoch object is not read again within the test: only the
		// bucket can tell.
		s, err := persist.NewStore(b, persist.StoreOptions{Buckets: 4, EpochCheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	old, newer := open(), open()
	e1, err := old.AdvanceEpoch(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Put(ctx, e1, persist.Record{Name: "s", Ceiling: 300, Czxid: 1, Mzxid: 2}); err != nil {
		t.Fatal(err)
	}
	e2, err := newer.AdvanceEpoch(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Seal(ctx, e2); err != nil {
		t.Fatal(err)
	}
	if err := newer.Put(ctx, e2, persist.Record{Name: "s", Ceiling: 500, Czxid: 1, Mzxid: 3}); err != nil {
		t.Fatal(err)
	}
	// Less than the old writer's cache holds already: nothing to write.
	err = old.Put(ctx, e1, persist.Record{Name: "s", Ceiling: 200, Czxid: 1, Mzxid: 2})
	if !errors.Is(err, persist.ErrFenced) {
		t.Fatalf("the deposed writer's no-op put: %v; want ErrFenced", err)
	}
}
