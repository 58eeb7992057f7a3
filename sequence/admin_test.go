package sequence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// Sequences from code: the library creates a sequence (a
// registration the primary initialises; again with the same settings is no
// error, with others it is ErrExists) and deletes it with the tombstone in
// the store first: the store's record and ZooKeeper's copy hold a ceiling
// at or above every ID handed out, and takers then get
// ErrUnknownSequence. (That a name created again starts above the
// tombstone is the primary's part: client.TestCreateAndDeleteOverHTTP.)
func TestCreateAndDeleteFromTheLibrary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(sequence.Options{})
	ctx := context.Background()

	created, err := c.Create(ctx, "lib", sequence.CreateOptions{Max: 1_000_000})
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	if created, err = c.Create(ctx, "lib", sequence.CreateOptions{Max: 1_000_000}); err != nil || created {
		t.Fatalf("create again with the same settings: %v, %v; want false, nil", created, err)
	}
	if _, err := c.Create(ctx, "lib", sequence.CreateOptions{Windows: 3}); !errors.Is(err, sequence.ErrExists) || !strings.Contains(err.Error(), "windows 0 (asked 3)") {
		t.Fatalf("create with other settings: %v; want ErrExists naming the difference", err)
	}
	if _, err := c.Create(ctx, "other", sequence.CreateOptions{Start: 10, Max: 5}); !errors.Is(err, sequence.ErrInvalidSettings) || !strings.Contains(err.Error(), "Max 5") {
		t.Fatalf("create with max below start: %v; want ErrInvalidSettings naming Max", err)
	}
	if _, err := c.Create(ctx, "bad/name", sequence.CreateOptions{}); !errors.Is(err, sequence.ErrInvalidName) {
		t.Fatalf("create of a bad name: %v", err)
	}
	st, _, err := c.Describe(ctx, "lib")
	if err != nil || !st.Registered || st.End != 1_000_000 {
		t.Fatalf("after create: %+v, %v; want a registration up to 1000000", st, err)
	}

	// The primary's part: initialise it.
	if _, err := e.admin().Keeper().Revalidate(ctx, "lib", 0, 100); err != nil {
		t.Fatal(err)
	}
	got, err := c.Take(ctx, "lib", 30)
	if err != nil {
		t.Fatal(err)
	}

	b, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, err := persist.NewStore(b, persist.StoreOptions{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, err := c.Delete(ctx, "lib", store)
	if err != nil {
		t.Fatal(err)
	}
	if ceiling < 100 {
		t.Fatalf("tombstone ceiling %d; want at least the ceiling 100 (%v were handed out)", ceiling, got)
	}
	rec, err := store.Get(ctx, "lib")
	if err != nil || !rec.Deleted() || rec.Dead < ceiling {
		t.Fatalf("the store holds %+v, %v; want a tombstone at %d", rec, err, ceiling)
	}
	d, err := e.admin().Meta().ReadDeletion(ctx, "lib")
	if err != nil || d.Ceiling < ceiling {
		t.Fatalf("ZooKeeper's copy of the tombstone: %+v, %v; want ceiling %d", d, err, ceiling)
	}
	// A taker that saw the sequence learns at once that it was deleted; it
	// does not wait for a restore (which would end at the deadline here,
	// within the default CeilingWait of 30 s).
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Take(tctx, "lib", 1); !errors.Is(err, sequence.ErrUnknownSequence) || !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("take after the delete: %v; want ErrUnknownSequence saying it was deleted", err)
	}
	if _, err := c.Delete(ctx, "lib", store); !errors.Is(err, sequence.ErrUnknownSequence) {
		t.Fatalf("delete again: %v; want ErrUnknownSequence", err)
	}
}
