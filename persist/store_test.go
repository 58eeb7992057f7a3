package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func rec(name string, ceiling, mzxid int64) Record {
	return Record{Name: name, Ceiling: ceiling, Czxid: 0x100000002, Mzxid: mzxid, Version: int32(mzxid % 100)}
}

func mustGet(t *testing.T, s *Store, name string) Record {
	t.Helper()
	r, err := s.Get(testCtx(t), name)
	if err != nil {
		t.Fatalf("get %q: %v", name, err)
	}
	return r
}

// tombstoneOf records in s that name is deleted up to ceiling (at least
// 1), as a delete does once ZooKeeper has deleted it, and returns the
// record s then holds.
func tombstoneOf(ctx context.Context, s *Store, name string, ceiling int64) (Record, error) {
	dead := max(ceiling, 1)
	epoch, _, err := s.Epoch(ctx)
	if err != nil {
		return Record{}, err
	}
	if err := s.Put(ctx, epoch, Record{Name: name, Ceiling: dead, Dead: dead}); err != nil {
		return Record{}, err
	}
	return s.Get(ctx, name)
}

func mustPut(t *testing.T, s *Store, epoch int64, recs ...Record) {
	t.Helper()
	if err := s.Put(testCtx(t), epoch, recs...); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		s := newStore(t, open(), StoreOptions{})
		at := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.UTC)
		want := []Record{
			{Name: "orders", Ceiling: 5000, Czxid: 0x100000002, Mzxid: 0x10000000a, Version: 3, Updated: at},
			{Name: "legacy-counter", Ceiling: 1 << 40, Czxid: 7, Mzxid: 9, Version: 2, Legacy: true, Updated: at},
			{Name: "gone", Ceiling: 77, Dead: 77, Updated: at},
			{Name: "naïve \"quoted\" name\n\x00\xff", Ceiling: 0, Updated: at},
		}
		if err := s.Put(ctx, 3, want...); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			want[i].Epoch = 3
			want[i].Updated = at.Truncate(time.Millisecond)
		}
		slices.SortFunc(want, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
		// A second store reads from the backend, not from a cache.
		other := newStore(t, open(), StoreOptions{})
		for _, w := range want {
			if got := mustGet(t, other, w.Name); !Equal(got, w) {
				t.Errorf("get %q = %+v, want %+v", w.Name, got, w)
			}
		}
		got, err := other.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("load: %d records, want %d", len(got), len(want))
		}
		for i := range want {
			if !Equal(got[i], want[i]) {
				t.Errorf("load[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
		if _, err := other.Get(ctx, "never"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get unknown: %v, want ErrNotFound", err)
		}
		if err := other.Check(ctx); err != nil {
			t.Fatalf("check: %v", err)
		}
	})
}

func TestStoreEmpty(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		s := newStore(t, open(), StoreOptions{})
		recs, err := s.Load(ctx)
		if err != nil || len(recs) != 0 {
			t.Fatalf("load of a new store: %d records, %v", len(recs), err)
		}
		if e, holder, err := s.Epoch(ctx); e != 0 || holder != "" || err != nil {
			t.Fatalf("epoch of a new store: %d %q %v", e, holder, err)
		}
		if err := s.Put(ctx, 0); err != nil {
			t.Fatalf("put of nothing: %v", err)
		}
	})
}

// TestMergeRule pins the join of Put down, one case per line.
func TestMergeRule(t *testing.T) {
	t.Parallel()
	base := Record{Name: "s", Ceiling: 100, Czxid: 1, Mzxid: 10, Version: 5, Live: 50, Start: 1, End: 1000}
	with := func(f func(*Record)) Record { r := base; f(&r); return r }
	for _, tc := range []struct {
		name    string
		old, in Record
		want    Record
	}{
		{"higher ceiling wins the observation",
			base, with(func(r *Record) { r.Ceiling, r.Mzxid, r.Version = 200, 12, 6 }),
			with(func(r *Record) { r.Ceiling, r.Mzxid, r.Version = 200, 12, 6 })},
		{"lower ceiling changes nothing, not even with a later zxid",
			base, with(func(r *Record) { r.Ceiling, r.Mzxid, r.Czxid = 50, 99, 98 }), base},
		{"higher ceiling with an older zxid (a new ensemble after a wipe) wins",
			base, with(func(r *Record) { r.Ceiling, r.Czxid, r.Mzxid, r.Version = 150, 0x3, 0x4, 0 }),
			with(func(r *Record) { r.Ceiling, r.Czxid, r.Mzxid, r.Version = 150, 0x3, 0x4, 0 })},
		{"equal ceiling, later zxid: the newer observation",
			base, with(func(r *Record) { r.Mzxid, r.Version = 11, 9 }), with(func(r *Record) { r.Mzxid, r.Version = 11, 9 })},
		{"equal ceiling, older zxid: stale",
			base, with(func(r *Record) { r.Mzxid, r.Version = 9, 1 }), base},
		{"a raise asserts no incarnation (Live 0) and keeps the record's",
			base, Record{Name: "s", Ceiling: 300, Czxid: 1, Mzxid: 20},
			with(func(r *Record) { r.Ceiling, r.Mzxid, r.Version = 300, 20, 0 })},
		{"a tombstone up to the ceiling deletes",
			base, Record{Name: "s", Ceiling: 100, Dead: 100}, with(func(r *Record) { r.Dead = 100 })},
		// Review finding 5: delete reads the ceiling, a raise lands, then
		// the tombstone: it must still take, keeping the higher ceiling.
		{"a tombstone below a racing raise still deletes the incarnation, keeping the ceiling",
			with(func(r *Record) { r.Ceiling = 900 }), Record{Name: "s", Ceiling: 100, Dead: 100},
			with(func(r *Record) { r.Ceiling, r.Dead = 900, 100 })},
		{"a raise after the tombstone cannot undelete (the repro of a rotation racing a delete)",
			with(func(r *Record) { r.Dead = 100 }), Record{Name: "s", Ceiling: 5000, Czxid: 77, Mzxid: 78},
			with(func(r *Record) { r.Ceiling, r.Czxid, r.Mzxid, r.Version, r.Dead = 5000, 77, 78, 0, 100 })},
		{"a tombstone without an incarnation (imported) is not a wildcard: a newer incarnation is live",
			Record{Name: "s", Ceiling: 500, Dead: 500}, with(func(r *Record) { r.Ceiling, r.Live = 700, 501 }),
			with(func(r *Record) { r.Ceiling, r.Live, r.Dead = 700, 501, 500 })},
		{"a newer incarnation brings its configuration",
			base, with(func(r *Record) { r.Live, r.Start, r.End, r.Windows = 101, 7, 9000, 4 }),
			with(func(r *Record) { r.Live, r.Start, r.End, r.Windows = 101, 7, 9000, 4 })},
		{"seen, epoch and updated each take the maximum",
			with(func(r *Record) { r.Seen, r.Epoch, r.Updated = 5, 2, time.UnixMilli(9) }),
			with(func(r *Record) { r.Seen, r.Epoch, r.Updated = 4, 3, time.UnixMilli(8) }),
			with(func(r *Record) { r.Seen, r.Epoch, r.Updated = 5, 3, time.UnixMilli(9) })},
	} {
		got := Merge(tc.old, tc.in)
		if !Equal(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
		if back := Merge(tc.in, tc.old); !Equal(back, got) {
			t.Errorf("%s: not commutative:\n %+v\n %+v", tc.name, got, back)
		}
	}
}

// TestStoreMonotone: a stored ceiling never decreases, whoever writes: the
// same store, a second store whose cache is stale, or many at once.
func TestStoreMonotone(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b1, b2 := &counting{Backend: open()}, open()
		s1 := newStore(t, b1, StoreOptions{})
		s2 := newStore(t, b2, StoreOptions{})

		mustPut(t, s1, 1, rec("a", 100, 10))
		mustPut(t, s1, 1, rec("a", 50, 11))
		if r := mustGet(t, s2, "a"); r.Ceiling != 100 || r.Mzxid != 10 {
			t.Fatalf("after a lower write: %+v, want ceiling 100 and the first observation", r)
		}
		// s2 raises; s1's view of the log's tail is now stale, and a
		// lower write through it must neither lower the ceiling nor be
		// lost.
		mustPut(t, s2, 1, rec("a", 200, 20))
		before := b1.gets.Load()
		mustPut(t, s1, 1, rec("a", 150, 15), rec("b", 7, 1))
		if b1.gets.Load() == before {
			t.Fatal("a write through a stale tail did not read the segment it collided with")
		}
		if r := s1.Requests(); r.PutConflicts != 1 || r.Puts != b1.puts.Load() {
			t.Fatalf("s1.Requests() = %+v after one write through a stale cache; want 1 conflict of %d PUTs", r, b1.puts.Load())
		}
		if r := mustGet(t, s2, "a"); r.Ceiling != 200 || r.Mzxid != 20 {
			t.Fatalf("stale writer lowered the record: %+v", r)
		}
		if r := mustGet(t, s2, "b"); r.Ceiling != 7 {
			t.Fatalf("the stale writer's other record was lost: %+v", r)
		}
		mustPut(t, s1, 1, rec("a", 300, 30))
		if r := mustGet(t, s2, "a"); r.Ceiling != 300 {
			t.Fatalf("after a raise: %+v", r)
		}

		// Many writers on two stores, random ceilings, and a third store
		// compacting all the while: the stored ceiling of each name is
		// the highest any Put returned for.
		names := []string{"a", "b", "c", "d", "e", "f"}
		var mu sync.Mutex
		highest := map[string]int64{"a": 300, "b": 7}
		var wg sync.WaitGroup
		writing, compacted := make(chan struct{}), 0
		compactor := newStore(t, open(), StoreOptions{})
		wg.Go(func() {
			for {
				res, err := compactor.Compact(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				compacted += res.Segments
				select {
				case <-writing:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
		var writers sync.WaitGroup
		for w := range 8 {
			s := []*Store{s1, s2}[w%2]
			writers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for range 15 {
					var batch []Record
					for range 1 + rng.IntN(3) {
						batch = append(batch, rec(names[rng.IntN(len(names))], rng.Int64N(1000), rng.Int64N(1000)))
					}
					if err := s.Put(ctx, 1, batch...); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, r := range batch {
						highest[r.Name] = max(highest[r.Name], r.Ceiling)
					}
					mu.Unlock()
				}
			})
		}
		writers.Wait()
		close(writing)
		wg.Wait()
		if compacted == 0 {
			t.Error("the compactor folded nothing while the writers wrote")
		}
		recs, err := newStore(t, open(), StoreOptions{}).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Ceiling != highest[r.Name] {
				t.Errorf("%s: stored ceiling %d, highest written %d", r.Name, r.Ceiling, highest[r.Name])
			}
		}
		if len(recs) != len(highest) {
			t.Errorf("%d records stored, %d names written", len(recs), len(highest))
		}
	})
}

// TestStoreOneObjectPerWrite: with a warm store and no other writer, a
// store write, however many records it holds, creates one object (a log
// segment) and reads one (the epoch object, to confirm no newer primary
// took over).
func TestStoreOneObjectPerWrite(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		b := &counting{Backend: open()}
		s := newStore(t, b, StoreOptions{EpochCheckInterval: time.Hour})
		mustPut(t, s, 1, rec("hot", 100, 1))
		gets, puts := b.gets.Load(), b.puts.Load()
		for i := range 10 {
			var recs []Record
			for k := range 50 {
				recs = append(recs, rec(fmt.Sprintf("s%02d", k), int64(200+i), int64(2+i)))
			}
			mustPut(t, s, 1, recs...)
		}
		if g, p := b.gets.Load()-gets, b.puts.Load()-puts; g != 10 || p != 10 {
			t.Fatalf("10 writes of 50 records cost %d GETs and %d PUTs, want 10 and 10", g, p)
		}
		if r := mustGet(t, s, "s49"); r.Ceiling != 209 {
			t.Fatalf("s49: %+v", r)
		}
		// The store's own count, which /metrics exports, is what reached
		// the backend.
		if r := s.Requests(); r.Gets != b.gets.Load() || r.Puts != b.puts.Load() || r.PutConflicts != 0 {
			t.Fatalf("Requests() = %+v; the backend saw %d GETs and %d PUTs, no conflicts", r, b.gets.Load(), b.puts.Load())
		}
	})
}

func TestStoreTombstone(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		s := newStore(t, open(), StoreOptions{})
		born := rec("gone", 1000, 40)
		born.Live = 1
		mustPut(t, s, 1, born)
		// delete read the znode with ceiling 900 before a raise to 1000
		// reached the store: the incarnation is deleted all the same.
		r, err := tombstoneOf(ctx, s, "gone", 900)
		if err != nil || !r.Deleted() || r.Ceiling != 1000 {
			t.Fatalf("tombstone: %+v, %v", r, err)
		}
		// A late write of the last live observation does not undelete.
		mustPut(t, s, 1, rec("gone", 1000, 40))
		if r := mustGet(t, s, "gone"); !r.Deleted() {
			t.Fatalf("stale write undeleted: %+v", r)
		}
		recs, err := s.Load(ctx)
		if err != nil || len(recs) != 1 || !recs[0].Deleted() {
			t.Fatalf("load: %+v, %v", recs, err)
		}
		// The primary raising the same incarnation while it is being
		// deleted (it persists first, then finds the znode gone): still
		// deleted.
		mustPut(t, s, 1, rec("gone", 1200, 80))
		if r := mustGet(t, s, "gone"); !r.Deleted() || r.Ceiling != 1200 {
			t.Fatalf("a raise of the deleted incarnation undeleted it: %+v", r)
		}
		// Created again above the old ceiling (a new incarnation): live.
		again := rec("gone", 1500, 90)
		again.Czxid++
		again.Live = 1201
		mustPut(t, s, 1, again)
		if r := mustGet(t, s, "gone"); r.Deleted() || r.Ceiling != 1500 {
			t.Fatalf("re-created: %+v", r)
		}
		// A tombstone of the old incarnation arriving late changes
		// nothing: it never buries the newer one, born above it.
		if r, err := tombstoneOf(ctx, s, "gone", 900); err != nil || r.Deleted() {
			t.Fatalf("a late tombstone of the old incarnation: %+v, %v; want the new one live", r, err)
		}
		// A registration with start 1, deleted before it was
		// initialised: a tombstone up to 1, so that a new one starts at 2.
		if r, err := tombstoneOf(ctx, s, "fresh", 0); err != nil || !r.Deleted() || r.Ceiling != 1 {
			t.Fatalf("tombstone of a registration: %+v, %v", r, err)
		}
	})
}

// TestStoreFencing: once a newer leader epoch has written, an older writer
// gets ErrFenced and writes nothing, whether it learns of the newer epoch
// from a bucket or from the epoch object.
func TestStoreFencing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		old := newStore(t, open(), StoreOptions{EpochCheckInterval: 300 * time.Millisecond})
		e1, err := old.AdvanceEpoch(ctx, "replica-1")
		if err != nil || e1 != 1 {
			t.Fatalf("first epoch: %d, %v", e1, err)
		}
		mustPut(t, old, e1, rec("a", 100, 1), rec("b", 100, 1))

		// The new primary writes "a" with epoch 2 without advancing the
		// epoch object (only its log segment tells).
		next := newStore(t, open(), StoreOptions{})
		mustPut(t, next, 2, rec("a", 200, 2))
		err = old.Put(ctx, e1, rec("a", 500, 3))
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("old writer: %v, want ErrFenced", err)
		}
		if !strings.Contains(err.Error(), "epoch 2") {
			t.Errorf("fencing error does not name the newer epoch: %v", err)
		}
		if r := mustGet(t, next, "a"); r.Ceiling != 200 || r.Epoch != 2 {
			t.Fatalf("after the fenced write: %+v", r)
		}
		// Fenced once, fenced everywhere: even buckets epoch 2 never
		// wrote.
		if err := old.Put(ctx, e1, rec("b", 500, 3)); !errors.Is(err, ErrFenced) {
			t.Fatalf("old writer, other bucket: %v, want ErrFenced", err)
		}
		if r := mustGet(t, next, "b"); r.Ceiling != 100 {
			t.Fatalf("fenced writer wrote b: %+v", r)
		}

		// Through the epoch object: a writer that read it recently may
		// write until its EpochCheckInterval passes, then is fenced.
		w2B := open()
		w2 := newStore(t, w2B, StoreOptions{EpochCheckInterval: 300 * time.Millisecond})
		e2, err := w2.AdvanceEpoch(ctx, "replica-2")
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, w2, e2, rec("c", 10, 1))
		e3, err := newStore(t, open(), StoreOptions{}).AdvanceEpoch(ctx, "replica-3")
		if err != nil || e3 != e2+1 {
			t.Fatalf("advance: %d, %v", e3, err)
		}
		time.Sleep(350 * time.Millisecond)
		if err := w2.Put(ctx, e2, rec("d", 10, 1)); !errors.Is(err, ErrFenced) {
			t.Fatalf("writer of epoch %d after epoch %d began: %v, want ErrFenced", e2, e3, err)
		}
		if _, err := w2.Get(ctx, "d"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the fenced writer wrote d: %v", err)
		}
		if e, holder, err := w2.Epoch(ctx); e != e3 || holder != "replica-3" || err != nil {
			t.Fatalf("epoch: %d %q %v", e, holder, err)
		}
	})
}

func TestAdvanceEpochConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		const contenders = 5
		got := make([]int64, contenders)
		var wg sync.WaitGroup
		for i := range contenders {
			s := newStore(t, open(), StoreOptions{})
			wg.Go(func() {
				e, err := s.AdvanceEpoch(ctx, fmt.Sprintf("replica-%d", i))
				if err != nil {
					t.Error(err)
				}
				got[i] = e
			})
		}
		wg.Wait()
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if len(slices.Compact(slices.Clone(sorted))) != contenders || sorted[0] < 1 {
			t.Fatalf("epochs %v: want %d distinct, positive", got, contenders)
		}
		e, holder, err := newStore(t, open(), StoreOptions{}).Epoch(ctx)
		if err != nil || e != sorted[contenders-1] {
			t.Fatalf("epoch %d (%v), want the highest handed out, %d", e, err, sorted[contenders-1])
		}
		if want := fmt.Sprintf("replica-%d", slices.Index(got, e)); holder != want {
			t.Fatalf("holder %q, want %q", holder, want)
		}
		t.Logf("epochs: %v", got)
	})
}

// corruptBuckets are bucket objects the store must refuse, keyed by what is
// wrong. Each is for the bucket of "victim" among n buckets.
func corruptBuckets(t testing.TB, n int) map[string][]byte {
	b := bucketOf("victim", n)
	valid := func(o *bucketObject) []byte {
		data, err := encodeBucket(o)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	good := valid(&bucketObject{bucket: b, buckets: n, epoch: 1, recs: []Record{{Name: "victim", Ceiling: 10, Epoch: 1}}})
	other := "x" // sorts after "victim", in another bucket
	for i := 0; bucketOf(other, n) == b; i++ {
		other = fmt.Sprint("x", i)
	}
	body := func(text string) []byte { // a well-formed object around text
		var buf strings.Builder
		zw := newGzip(&buf)
		zw.Write([]byte(text))
		zw.Close()
		return []byte("seqkeeper-bucket v1\n" + buf.String())
	}
	header := fmt.Sprintf("bucket %d of %d epoch 1 records 1\n", b, n)
	return map[string][]byte{
		"garbage":          []byte("this is not a bucket"),
		"empty":            {},
		"truncated gzip":   good[:len(good)-9],
		"trailing garbage": append(slices.Clone(good), "junk"...),
		"flipped bit":      func() []byte { d := slices.Clone(good); d[len(d)/2+10] ^= 0x40; return d }(),
		"wrong bucket record": valid(&bucketObject{bucket: b, buckets: n, epoch: 1,
			recs: []Record{{Name: "victim", Ceiling: 10, Epoch: 1}, {Name: other, Ceiling: 10, Epoch: 1}}}),
		"wrong bucket header":       valid(&bucketObject{bucket: (b + 1) % n, buckets: n, epoch: 1}),
		"negative ceiling":          body(header + `"victim" -5 1 0 0 0 - 0` + "\n"),
		"record count":              body(fmt.Sprintf("bucket %d of %d epoch 1 records 2\n", b, n) + `"victim" 5 1 0 0 0 - 0` + "\n"),
		"record epoch above bucket": body(header + `"victim" 5 2 0 0 0 - 0` + "\n"),
		"unsorted": body(fmt.Sprintf("bucket %d of %d epoch 1 records 2\n", b, n) +
			`"victim" 5 1 0 0 0 - 0` + "\n" + `"victim" 6 1 0 0 0 - 0` + "\n"),
		"bad flags":     body(header + `"victim" 5 1 0 0 0 X 0` + "\n"),
		"newer version": []byte("seqkeeper-bucket v3\nwhatever comes next"),
	}
}

// TestStoreCorrupt: a corrupt object is an error naming it on every path,
// never an empty bucket, never overwritten, and confined to its bucket.
func TestStoreCorrupt(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		for what, data := range corruptBuckets(t, DefaultBuckets) {
			t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
				ctx := testCtx(t)
				b := isolated(t, open())
				s := newStore(t, b, StoreOptions{})
				mustPut(t, s, 1, rec("healthy", 10, 1))
				key := bucketKey(bucketOf("victim", DefaultBuckets))
				etag, err := b.Put(ctx, key, data, "")
				if err != nil {
					t.Fatal(err)
				}
				want := ErrCorrupt
				if what == "newer version" {
					want = ErrNewerFormat
				}
				fresh := newStore(t, b, StoreOptions{})
				_, err = fresh.Get(ctx, "victim")
				if !errors.Is(err, want) || !strings.Contains(err.Error(), key) {
					t.Errorf("get: %v, want %v naming %s", err, want, key)
				}
				t.Log(err)
				recs, err := fresh.Load(ctx)
				if !errors.Is(err, want) || !strings.Contains(err.Error(), key) {
					t.Errorf("load: %v, want %v naming %s", err, want, key)
				}
				if !Affects(err, "victim") || Affects(err, "healthy") {
					t.Errorf("load error %v: Affects(victim) = %v, Affects(healthy) = %v", err, Affects(err, "victim"), Affects(err, "healthy"))
				}
				if len(recs) != 1 || recs[0].Name != "healthy" {
					t.Errorf("load returned %+v, want the healthy record", recs)
				}
				// A write lands in the log; folding it into the corrupt
				// bucket fails for that bucket only, and the checkpoint
				// stays, so the log keeps the victim's ceiling.
				mustPut(t, s, 1, rec("victim", 99, 9), rec("healthy", 20, 2))
				for _, st := range []*Store{s, fresh} {
					_, err := st.Compact(ctx, 1)
					if !errors.Is(err, want) || !Affects(err, "victim") || Affects(err, "healthy") {
						t.Errorf("compact: %v, want %v for victim only", err, want)
					}
				}
				if _, got, _ := b.Get(ctx, key); got != etag {
					t.Error("put overwrote the corrupt object")
				}
				if r := mustGet(t, s, "healthy"); r.Ceiling != 20 {
					t.Errorf("healthy sequence not written next to the corrupt bucket: %+v", r)
				}
			})
		}
	})
}

func TestStoreCorruptMetaAndEpoch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b := open()
		if _, err := b.Put(ctx, epochKey, []byte("seqkeeper-epoch v1\nepoch -3\nholder \"x\"\nupdated 0\n"), ""); err != nil {
			t.Fatal(err)
		}
		s := newStore(t, b, StoreOptions{})
		if _, err := s.AdvanceEpoch(ctx, "r"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "epoch") {
			t.Errorf("advance over a corrupt epoch object: %v", err)
		}
		if err := s.Put(ctx, 1, rec("a", 1, 1)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("put with a corrupt epoch object: %v", err)
		}
		if err := s.Check(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("check with a corrupt epoch object: %v", err)
		}

		b2 := isolated(t, open())
		if _, err := b2.Put(ctx, metaKey, []byte("seqkeeper-store v1\nbuckets lots\n"), ""); err != nil {
			t.Fatal(err)
		}
		s2 := newStore(t, b2, StoreOptions{})
		if _, err := s2.Load(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "meta") {
			t.Errorf("load with a corrupt meta object: %v", err)
		}
		if err := s2.Put(ctx, 1, rec("a", 1, 1)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("put with a corrupt meta object: %v", err)
		}
		if _, err := b2.Put(ctx, "meta", []byte("seqkeeper-store v9\n"), ""); !errors.Is(err, ErrConflict) {
			t.Fatalf("the corrupt meta object was replaced: %v", err)
		}
	})
}

func TestStoreBucketMismatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		mustPut(t, newStore(t, open(), StoreOptions{Buckets: 16}), 1, rec("a", 42, 1))
		_, err := newStore(t, open(), StoreOptions{Buckets: 32}).Load(ctx)
		if !errors.Is(err, ErrBucketMismatch) || !strings.Contains(err.Error(), "16") {
			t.Fatalf("load with another bucket count: %v, want ErrBucketMismatch naming 16", err)
		}
		// Zero adopts the store's count.
		if r := mustGet(t, newStore(t, open(), StoreOptions{}), "a"); r.Ceiling != 42 {
			t.Fatalf("adopting store: %+v", r)
		}
	})
}

func TestNewStoreOptions(t *testing.T) {
	t.Parallel()
	b, err := NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []StoreOptions{{Buckets: -1}, {Buckets: MaxBuckets + 1}, {Parallelism: -1}, {EpochCheckInterval: -time.Second}} {
		if _, err := NewStore(b, opts); err == nil {
			t.Errorf("NewStore(%+v) accepted", opts)
		}
	}
	if _, err := NewStore(nil, StoreOptions{}); err == nil {
		t.Error("NewStore(nil) accepted")
	}
	s := newStore(t, b, StoreOptions{})
	if err := s.Put(testCtx(t), 1, Record{Name: "", Ceiling: 1}); err == nil {
		t.Error("put of a nameless record accepted")
	}
	if err := s.Put(testCtx(t), 1, Record{Name: "x", Ceiling: -1}); err == nil {
		t.Error("put of a negative ceiling accepted")
	}
	if err := s.Put(testCtx(t), -1, Record{Name: "x", Ceiling: 1}); err == nil {
		t.Error("put with a negative epoch accepted")
	}
}

// TestStoreS3Outage: with the object store down, Put fails within its
// context with an error naming the store, and works again once the store is
// back.
func TestStoreS3Outage(t *testing.T) {
	t.Parallel()
	m := testenv.StartMinIO(t)
	env := m.S3()
	env.Bucket = "outage"
	ctx := testCtx(t)
	b, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, b, StoreOptions{EpochCheckInterval: time.Hour})
	mustPut(t, s, 1, rec("a", 100, 1))

	m.Stop()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	err = s.Put(pctx, 1, rec("a", 200, 2))
	cancel()
	took := time.Since(start)
	if err == nil {
		t.Fatal("put with the store down succeeded")
	}
	if took > 4*time.Second {
		t.Errorf("put took %s with a 2s context", took)
	}
	if !strings.Contains(err.Error(), env.Endpoint) || !strings.Contains(err.Error(), "outage") {
		t.Errorf("error does not name the store: %v", err)
	}
	if strings.Contains(err.Error(), env.SecretKey) {
		t.Errorf("error shows the secret: %v", err)
	}
	t.Logf("with the store down (%s): %v", took.Round(time.Millisecond), err)
	if err := s.Check(ctx); err == nil {
		t.Error("check with the store down succeeded")
	}

	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, 1, rec("a", 300, 3))
	if r := mustGet(t, newStore(t, b, StoreOptions{}), "a"); r.Ceiling != 300 {
		t.Fatalf("after the outage: %+v", r)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("check after the outage: %v", err)
	}
}
