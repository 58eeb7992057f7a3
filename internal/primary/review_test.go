package primary_test

// Regression tests for the duplicate and lost-delete paths a review of the
// code found (the numbers are the review's). Each failed on the code it was
// found in.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ids records every ID handed out and fails the test on a second one.
type ids map[int64]string

func (m ids) add(t *testing.T, who string, rs state.Ranges) {
	t.Helper()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			if first, dup := m[id]; dup {
				t.Errorf("id %d handed out twice: to %s, then to %s", id, first, who)
			}
			m[id] = who
		}
	}
}

// fileRig runs a primary on a file store for the servers and test root,
// and returns a client dialled with timeout to servers.
type fileRig struct {
	t       *testing.T
	servers []string
	root    string
	store   *persist.Store
}

func newFileRig(t *testing.T, servers []string, zroot string) *fileRig {
	t.Helper()
	r, _ := startFilePrimary(t, servers, zroot, fileStore(t, t.TempDir()), nil)
	c := r.client(servers, 10*time.Second)
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(context.Background(), r.root); return ok })
	return r
}

// startFilePrimary runs a primary on store until the test ends, tuned by
// tune (nil for the test defaults), without waiting for it to lead.
func startFilePrimary(t *testing.T, servers []string, zroot string, store *persist.Store, tune func(*config.Primary)) (*fileRig, *primary.Primary) {
	t.Helper()
	r := &fileRig{t: t, servers: servers, root: zroot + "/all-sequences", store: store}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = zroot + "/cluster"
	cfg.Runway = time.Second
	cfg.MinReserve = 100
	cfg.SweepInterval = 200 * time.Millisecond
	if tune != nil {
		tune(&cfg)
	}
	p, err := primary.New(cfg, primary.Deps{Sequences: r.client(servers, 4*time.Second), Store: r.store, Holder: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, p
}

func fileStore(t *testing.T, dir string) *persist.Store {
	t.Helper()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (r *fileRig) client(servers []string, timeout time.Duration) *seqzk.Client {
	r.t.Helper()
	zc, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: timeout})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(zc.Close)
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: r.root, CeilingWait: 10 * time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// Finding 2: a worker's take, delayed on the network, reaches a sequence
// that was deleted (tombstone first) and registered again meanwhile, at the
// very version the worker cached. It used to land, and the fence that
// followed set next = stale ceiling + 1, below what the new incarnation had
// issued. Now the write checks the marker of the state it came from, which
// died with the old znode, so it never lands.
func TestDelayedWriteOnARecreatedSequence(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	ctx := context.Background()
	w := r.client(z.Servers, 10*time.Second)
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, z.Servers[0])
	x := r.client([]string{proxy.Addr()}, 20*time.Second)
	issued := ids{}
	for i := 0; i < 5; i++ {
		got, err := x.Take(ctx, "s", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "x before the delete", got)
	}
	conn := w.ZK()
	_, stat, err := conn.Get(ctx, r.root+"/s")
	if err != nil {
		t.Fatal(err)
	}
	cached := stat.Version

	proxy.Pause() // x's next take is held on the network
	xdone := make(chan error, 1)
	go func() {
		got, err := x.Take(ctx, "s", 10)
		issued.add(t, "x's delayed take", got)
		xdone <- err
	}()
	time.Sleep(300 * time.Millisecond)

	ceiling, err := w.Delete(ctx, "s", r.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, stat, err := conn.Get(ctx, r.root+"/s")
		if err != nil {
			t.Fatal(err)
		}
		if stat.Version == cached {
			break
		}
		if stat.Version > cached {
			t.Fatalf("set-up: version %d past x's cached %d", stat.Version, cached)
		}
		got, err := w.Take(ctx, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Start <= ceiling {
			t.Fatalf("the re-created sequence handed out %s, at or below its tombstone's ceiling %d", got, ceiling)
		}
		issued.add(t, "the new incarnation", got)
	}
	proxy.Resume()
	if err := <-xdone; err != nil {
		t.Logf("x's delayed take: %v", err)
	}
	for i := 0; i < 200; i++ {
		got, err := w.Take(ctx, "s", 20)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "the new incarnation, later", got)
	}
}

// Finding 3: a bounded sequence whose ceiling reached its end, lost by
// ZooKeeper, came back at next = end and handed out its last ID again.
func TestRestoredBoundedSequenceStaysExhausted(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "b", seqzk.Registration{End: 50}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	for len(issued) < 50 {
		got, err := w.Take(ctx, "b", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "before the loss", got)
	}
	loseZnodes(t, w, "b")
	got, err := w.Take(ctx, "b", 10)
	issued.add(t, "after the restore", got)
	if !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("take after the restore: %s, %v; want ErrExhausted", got, err)
	}
}

// Finding 4: one record with ceiling MaxInt64 made every restore fail, so
// no lost sequence came back; and sequences at the top of the space must
// work to their last ID, then say exhausted.
func TestRestoreAtTheTopOfTheSpace(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "top", seqzk.Registration{Start: math.MaxInt64 - 150}); err != nil {
		t.Fatal(err)
	}
	if err := w.Register(ctx, "other", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	var last int64
	for {
		got, err := w.Take(ctx, "top", 40)
		if errors.Is(err, state.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "top", got)
		last = got[len(got)-1].End
	}
	if last != math.MaxInt64-1 { // MaxInt64 itself is never handed out (state.MaxID)
		t.Fatalf("top ended at %d; want %d", last, int64(math.MaxInt64-1))
	}
	if _, err := w.Take(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
	loseZnodes(t, w, "top", "other")
	for _, n := range []string{"top", "other"} {
		waitFor(t, n+" restored", func() bool { ok, _, _ := w.ZK().Exists(context.Background(), r.root+"/"+n); return ok })
	}
	if got, err := w.Take(ctx, "top", 1); !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("top after the restore: %s, %v; want ErrExhausted", got, err)
	}
	if _, err := w.Take(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
}

// Finding 4: at the top of the space, ceiling + 1 overflowed, so after a
// rollback revalidation did not move next and IDs were handed out again.
func TestRollbackAtTheTopOfTheSpace(t *testing.T) {
	ens := testenv.StartEnsemble(t, 1)
	r := newFileRig(t, ens.Servers(), "/test")
	w := r.client(ens.Servers(), 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "top", seqzk.Registration{Start: math.MaxInt64 - 150}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	take := func(n int, who string) (exhausted bool) {
		t.Helper()
		for i := 0; i < n; i++ {
			got, err := w.Take(ctx, "top", 10)
			if errors.Is(err, state.ErrExhausted) {
				return true
			}
			if err != nil {
				t.Fatal(err)
			}
			issued.add(t, who, got)
		}
		return false
	}
	take(2, "before the copy")
	saved := ens.Snapshot(t, 0)
	take(5, "the lost history")
	ens.Rollback(t, 0, saved)
	// Everything up to the stored ceiling (the whole space here: the
	// reserve reached its top) may have been issued in the lost history,
	// so the sequence comes back exhausted.
	if !take(5, "after the rollback") {
		t.Fatal("the sequence handed out IDs after a rollback although its whole space was reserved")
	}
}

// The fence: a primary deposed while idle (it has nothing to write, so no
// write is refused) must stop within a bounded time; and what it wrote
// after its successor took the epoch object, before its successor sealed
// the store, can only have raised ceilings.
func TestDeposedIdlePrimaryStops(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	run := r.start("old", func(c *config.Primary) { c.FenceCheckInterval = 200 * time.Millisecond })
	c := r.client(10 * time.Second)
	waitFor(t, "the primary leading", func() bool { return run.p.Status().Leading })
	if err := c.Register(context.Background(), "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(context.Background(), "x", 1); err != nil {
		t.Fatal(err)
	}
	before, err := r.store().Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store().AdvanceEpoch(context.Background(), "new"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-run.done:
		if !errors.Is(err, primary.ErrFenced) {
			t.Errorf("Run returned %v; want ErrFenced", err)
		}
		run.done <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatalf("the deposed primary is still running 5 s later (leading %v)", run.p.Status().Leading)
	}
	after, err := r.store().Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if after.Ceiling < before.Ceiling {
		t.Fatalf("stored ceiling went down from %d to %d", before.Ceiling, after.Ceiling)
	}
}

// Version wrap: ZooKeeper keeps a znode's data version in an int32 that
// wraps, and an expected version of -1 makes a write unconditional. The
// primary moves a busy sequence onto a fresh znode well before that
// (RotateVersion, set low here so the test crosses it many times: six
// rotations while each sequence is busy, two with -short) while workers
// take from it and from its windows; nothing is handed out twice, and the
// versions stay below the threshold plus the writes of one sweep.
func TestRotationUnderLoad(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	// Low, so that a windowed sequence rotates often too: its clients
	// carve windows sized from demand, so its own znode is written only
	// every few seconds.
	const rotateAt = 12
	rotations := int64(3)
	if testing.Short() {
		rotations = 1
	}
	run := r.start("p1", func(c *config.Primary) { c.RotateVersion = rotateAt })
	c := r.client(20 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "plain", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "windowed", seqzk.Registration{Windows: 3}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plain", "windowed"} {
		l := newLedger()
		wctx, cancel := context.WithCancel(ctx)
		wg := r.workers(wctx, 4, name, l)
		waitForUpTo(t, 2*time.Minute, name+": the first rotations", func() bool { return run.p.Stats().Rotated >= rotations })
		before := run.p.Stats().Rotated
		waitForUpTo(t, 2*time.Minute, name+": as many more", func() bool { return run.p.Stats().Rotated >= before+rotations })
		cancel()
		wg.Wait()
		l.check(t)
		_, stat, err := c.ZK().Get(context.Background(), r.root+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d IDs taken by 4 workers across %d rotations; version now %d", name, l.issued, run.p.Stats().Rotated, stat.Version)
	}
}

// pausedBackend makes Put and Delete wait while the test holds pause.
type pausedBackend struct {
	persist.Backend
	pause *sync.RWMutex
}

func (b pausedBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	b.pause.RLock()
	defer b.pause.RUnlock()
	return b.Backend.Put(ctx, key, data, ifMatch)
}

func (b pausedBackend) Delete(ctx context.Context, key string) error {
	b.pause.RLock()
	defer b.pause.RUnlock()
	return b.Backend.Delete(ctx, key)
}

// The store loses an object (deleted, or rolled back) while ZooKeeper keeps
// its data: the audit finds the ceilings missing and persists them again,
// idle sequences included, so that a later ZooKeeper data loss does not hit
// both.
func TestAuditRepersistsWhatTheStoreLost(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	pause := &sync.RWMutex{}
	store, err := persist.NewStore(pausedBackend{b, pause}, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, p := startFilePrimary(t, z.Servers, z.Root, store, func(c *config.Primary) {
		c.SweepInterval, c.AuditInterval = 100*time.Millisecond, 300*time.Millisecond
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(context.Background(), r.root); return ok })
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		if err := c.Register(ctx, n, seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, n, 1); err != nil {
			t.Fatal(err)
		}
	}
	// The primary first has nothing left to raise: every ceiling stays
	// put for a second (ten sweeps). A raise it made after the loss would
	// put that record back by itself, and the audit would rightly count
	// one fewer lost.
	ceilings := func() []int64 {
		var out []int64
		for _, n := range names {
			st, _, err := c.Describe(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st.Ceiling)
		}
		return out
	}
	for prev, deadline := ceilings(), time.Now().Add(30*time.Second); ; {
		time.Sleep(time.Second)
		cur := ceilings()
		if slices.Equal(prev, cur) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ceilings still move after 30 s: %v", cur)
		}
		prev = cur
	}
	// Every bucket object and log segment goes: the store lost
	// everything it held. The next write of the primary lands beyond the
	// hole in the log, where no reader looks until the audit's seal
	// claims the first missing position again. The store's writes wait
	// meanwhile, so that none is half done (a temporary file about to be
	// renamed into place) while the objects go.
	pause.Lock()
	buckets, err := filepath.Glob(filepath.Join(dir, "buckets", "*"))
	segments, err2 := filepath.Glob(filepath.Join(dir, "log", "*"))
	if err != nil || err2 != nil || len(buckets)+len(segments) == 0 {
		pause.Unlock()
		t.Fatalf("store objects: %v %v, %v %v", buckets, segments, err, err2)
	}
	for _, b := range append(buckets, segments...) {
		if err := os.Remove(b); err != nil {
			pause.Unlock()
			t.Fatal(err)
		}
	}
	pause.Unlock()
	for _, n := range names {
		st, _, err := c.Describe(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, n+" persisted again", func() bool {
			rec, err := store.Get(ctx, n)
			return err == nil && rec.Ceiling >= st.Ceiling
		})
	}
	if p.Stats().StoreLost < int64(len(names)) {
		t.Fatalf("StoreLost %d; want at least %d", p.Stats().StoreLost, len(names))
	}
}

// Legacy 8-byte counters have no stamp, so a restore of ZooKeeper from an
// older copy used to take them back for good, and every ID taken after the
// copy was handed out again. After a leader election the primary moves a
// counter last written before it up to the mark the store holds.
func TestRollbackOfALegacyCounter(t *testing.T) {
	ens := testenv.StartEnsemble(t, 1)
	r := newFileRig(t, ens.Servers(), "/test")
	w := r.client(ens.Servers(), 10*time.Second)
	ctx := context.Background()
	if _, err := w.ZK().Create(context.Background(), r.root+"/old", binary.BigEndian.AppendUint64(nil, 7), 0); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	take := func(n int, who string) {
		t.Helper()
		for i := 0; i < n; i++ {
			got, err := w.Take(ctx, "old", 3)
			if err != nil {
				t.Fatal(err)
			}
			issued.add(t, who, got)
			time.Sleep(10 * time.Millisecond)
		}
	}
	take(3, "before the copy")
	saved := ens.Snapshot(t, 0)
	take(5, "the lost history")
	var last int64
	for id := range issued {
		last = max(last, id)
	}
	waitFor(t, "a mark above the lost history's IDs", func() bool {
		rec, err := r.store.Get(ctx, "old")
		return err == nil && rec.Ceiling >= last
	})
	ens.Rollback(t, 0, saved)
	waitFor(t, "the counter moved up past the lost history", func() bool {
		st, _, err := w.Describe(ctx, "old")
		return err == nil && st.Next >= last
	})
	take(5, "after the rollback")
}

// A store object that cannot be read when a primary starts (here a bucket
// object that is a symbolic link to itself: every read fails, neither
// "corrupt" nor "not found") leaves
// only its own sequences alone, and only until it can be read again: the
// primary starts, serves the other sequences, and picks the object up at a
// later sweep.
func TestUnreadableBucketAtStartIsReadAgain(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	store := fileStore(t, dir)
	ctx := context.Background()
	epoch, err := store.AdvanceEpoch(ctx, "seed")
	if err != nil {
		t.Fatal(err)
	}
	// Two sequences the store knows and ZooKeeper lacks: the primary
	// restores them, except the one whose bucket it cannot read.
	recs := []persist.Record{{Name: "a", Ceiling: 100}, {Name: "b", Ceiling: 200}}
	if err := store.Put(ctx, epoch, recs...); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Compact(ctx, epoch); err != nil { // into the buckets
		t.Fatal(err)
	}
	objs, err := filepath.Glob(filepath.Join(dir, "buckets", "*"))
	if err != nil || len(objs) != 2 {
		t.Fatalf("want two bucket objects, got %v %v", objs, err)
	}
	blocked := objs[0]
	data, err := os.ReadFile(blocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(blocked), blocked); err != nil {
		t.Fatal(err)
	}
	r, _ := startFilePrimary(t, z.Servers, z.Root, store, nil)
	w := r.client(z.Servers, 10*time.Second)
	exists := func(n string) bool { ok, _, _ := w.ZK().Exists(context.Background(), r.root+"/"+n); return ok }
	waitFor(t, "one sequence restored", func() bool { return exists("a") || exists("b") })
	time.Sleep(time.Second)
	if exists("a") && exists("b") {
		t.Fatal("both restored although one bucket could not be read")
	}
	// The object becomes readable again, at once: an object missing for a
	// moment would be an object the store lost.
	tmp := filepath.Join(dir, "restored.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, blocked); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both restored", func() bool { return exists("a") && exists("b") })
	for _, n := range []string{"a", "b"} {
		got, err := w.Take(ctx, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"a": 100, "b": 200}[n]; got[0].Start <= want {
			t.Fatalf("%s restored at %d, at or below its stored ceiling %d", n, got[0].Start, want)
		}
	}
}

// The store's epoch object is lost while its buckets still carry the epoch
// of their last writer: a new primary's first epoch is then below theirs,
// and each term used to end fenced by its own store. The primary advances
// past the buckets' epoch at once and leads.
func TestLostEpochObjectDoesNotStall(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	seed := fileStore(t, dir)
	ctx := context.Background()
	var epoch int64
	for range 5 {
		e, err := seed.AdvanceEpoch(ctx, "earlier")
		if err != nil {
			t.Fatal(err)
		}
		epoch = e
	}
	if err := seed.Put(ctx, epoch, persist.Record{Name: "a", Ceiling: 100}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "epoch")); err != nil {
		t.Fatal(err)
	}
	// A new process: its store has seen no bucket yet.
	r, p := startFilePrimary(t, z.Servers, z.Root, fileStore(t, dir), nil)
	waitForUpTo(t, 10*time.Second, "the primary leading", func() bool { return p.Status().Leading })
	if got := p.Status().Epoch; got <= epoch {
		t.Fatalf("leading at epoch %d, not above the buckets' %d", got, epoch)
	}
	w := r.client(z.Servers, 10*time.Second)
	got, err := w.Take(ctx, "a", 1) // restored above its record
	if err != nil || got[0].Start <= 100 {
		t.Fatalf("take = %s, %v; want above 100", got, err)
	}
}

// A sequence validated by a release without markers (a zkepoch line, no
// marker) is refused by clients of this one; the primary must stamp it
// again, or every such sequence stalls after an upgrade.
func TestStateWithoutAMarkerIsStampedAgain(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	epoch, err := w.CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := state.State{Start: 1, Next: 51, Ceiling: 1000, End: state.MaxID, ZKEpoch: epoch}
	if _, err := w.ZK().Create(context.Background(), r.root+"/old", old.Encode(), 0); err != nil {
		t.Fatal(err)
	}
	got, err := w.Take(ctx, "old", 5)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Start <= 1000 {
		t.Fatalf("took %s: at or below the old ceiling 1000, which the store never covered", got)
	}
}

// Found by the model test: a name deleted, registered again and deleted
// before anything was issued reported a tombstone of start-1 (0), though
// the store kept the first incarnation's higher ceiling. Delete reports
// what the store holds.
func TestDeleteReportsTheStoredTombstone(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Take(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	first, err := w.Delete(ctx, "s", r.store)
	if err != nil || first < 10 {
		t.Fatalf("first delete: %d, %v", first, err)
	}
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	second, err := w.Delete(ctx, "s", r.store)
	// The primary may or may not have initialised the new registration
	// (above the first tombstone) before the second delete.
	if err != nil || second < first {
		t.Fatalf("second delete: %d, %v; want at least the stored tombstone %d", second, err, first)
	}
}
