package seqzk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

func TestTombstoneCeiling(t *testing.T) {
	legacy := make([]byte, 8)
	binary.BigEndian.PutUint64(legacy, 77)
	st, err := state.ParseState("l", legacy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		st   state.State
		want int64
	}{
		{"legacy: the counter", st, 77},
		{"registration: start-1, nothing issued", state.State{Registered: true, Start: 10}, 9},
		{"full: the ceiling", state.State{Start: 1, Next: 5, Ceiling: 40}, 40},
		{"born past its end: its floor", state.State{Start: 1, End: 20, Next: 21, Ceiling: 20, PushFloor: 24}, 24},
	} {
		if got := seqzk.TombstoneCeiling(tt.st); got != tt.want {
			t.Errorf("%s: tombstone ceiling %d, want %d", tt.name, got, tt.want)
		}
	}
}

// failingBackend refuses store writes while failing is set.
type failingBackend struct {
	persist.Backend
	failing atomic.Bool
}

func (b *failingBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if b.failing.Load() && strings.HasPrefix(key, "log/") {
		return "", errors.New("the store is unreachable")
	}
	return b.Backend.Put(ctx, key, data, ifMatch)
}

// A delete records the deletion in ZooKeeper before the store: when the
// store then refuses its tombstone, the delete says so (ZooKeeper holds
// it), and running it again writes the tombstone; a third run finds
// nothing to delete.
func TestDeleteWhoseTombstoneFailedIsCompletedByRunningItAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "s", seqzk.Registration{}, 100)
	fb, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := &failingBackend{Backend: fb}
	store, err := persist.NewStore(b, persist.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.failing.Store(true)
	if _, err := c.Operator().Delete(ctx, "s", store); err == nil || !strings.Contains(err.Error(), "ZooKeeper holds the change") {
		t.Fatalf("delete with the store refusing its tombstone: %v; want an error saying ZooKeeper holds the deletion", err)
	}
	if d, err := c.Meta().ReadDeletion(ctx, "s"); err != nil || d.Ceiling != 100 {
		t.Fatalf("ZooKeeper's deletion record: %+v, %v; want ceiling 100", d, err)
	}
	b.failing.Store(false)
	if dead, err := c.Operator().Delete(ctx, "s", store); err != nil || dead != 100 {
		t.Fatalf("delete run again: %d, %v; want the tombstone (100) written", dead, err)
	}
	if rec, err := store.Get(ctx, "s"); err != nil || !rec.Deleted() || rec.Ceiling != 100 {
		t.Fatalf("the store's record: %+v, %v; want a tombstone up to 100", rec, err)
	}
	if _, err := c.Operator().Delete(ctx, "s", store); !errors.Is(err, seqzk.ErrUnknownSequence) {
		t.Fatalf("a third delete: %v; want unknown sequence", err)
	}
}
