package reconcile_test

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a sequences root on the shared real ZooKeeper and a file store.
type rig struct {
	t     *testing.T
	seqs  *seqzk.Client
	conn  *zkclient.Client
	store *persist.Store
	dir   string // the store's directory
	root  string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	z := testenv.ZooKeeper(t)
	zc, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{SessionTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	r := &rig{t: t, conn: zc, root: z.Path("all-sequences")}
	if err := testenv.CreateAll(zc, r.root); err != nil {
		t.Fatal(err)
	}
	if r.seqs, err = seqzk.NewClient(zc, seqzk.Options{Root: r.root, CeilingWait: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r.dir = t.TempDir() + "/store"
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := persist.NewFile(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = persist.NewStore(b, persist.StoreOptions{Buckets: 16}); err != nil {
		t.Fatal(err)
	}
	return r
}

// initialise registers name and sets its ceiling, standing in for the
// primary (without writing the store).
func (r *rig) initialise(name string, ceiling int64) state.State {
	r.t.Helper()
	ctx := context.Background()
	if err := r.seqs.Register(ctx, name, seqzk.Registration{}); err != nil {
		r.t.Fatal(err)
	}
	st, err := r.seqs.Keeper().Revalidate(ctx, name, 0, ceiling)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *rig) put(recs ...persist.Record) {
	r.t.Helper()
	if err := r.store.Put(context.Background(), 0, recs...); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) stored(name string) persist.Record {
	r.t.Helper()
	rec, err := r.store.Get(context.Background(), name)
	if err != nil {
		r.t.Fatalf("store record of %q: %v", name, err)
	}
	return rec
}

func (r *rig) compare() map[string]reconcile.Finding {
	r.t.Helper()
	rep, err := reconcile.Compare(context.Background(), r.seqs, r.store)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make(map[string]reconcile.Finding, len(rep.Findings))
	for _, f := range rep.Findings {
		out[f.Sequence] = f
	}
	return out
}

// Every kind of disagreement between ZooKeeper and the store, classified
// by Compare, described by Plan and repaired by Apply (the store first),
// after which Compare finds nothing left to do.
func TestCompareAndApply(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	const minReserve = 50
	headroom := reconcile.Headroom(minReserve)

	r.initialise("covered", 300)
	r.put(persist.Record{Name: "covered", Ceiling: 300})
	r.initialise("uncovered", 500)
	r.initialise("above", 800)
	r.put(persist.Record{Name: "above", Ceiling: 300})
	r.put(persist.Record{Name: "lost", Start: 1, Ceiling: 700})
	r.put(persist.Record{Name: "gone", Ceiling: 900, Dead: 900})
	// Deleted, but the store lost its tombstone: ZooKeeper's deletion
	// record says so.
	r.put(persist.Record{Name: "undeleted", Live: 1, Ceiling: 600})
	if err := r.seqs.Meta().Bury(ctx, "undeleted", 600); err != nil {
		t.Fatal(err)
	}
	// Missing from ZooKeeper in the era it was last seen in: deleted by
	// hand, not lost.
	epoch, err := r.seqs.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	era, err := r.seqs.Meta().CurrentEra(ctx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	r.put(persist.Record{Name: "by-hand", Live: 1, Ceiling: 300, Seen: era.Value})
	if err := r.seqs.Register(ctx, "registered", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	counter := make([]byte, 8)
	binary.BigEndian.PutUint64(counter, 41)
	if _, err := r.conn.Session().Create(context.Background(), r.root+"/legacy", counter, 0); err != nil {
		t.Fatal(err)
	}
	r.put(persist.Record{Name: "legacy", Legacy: true, Ceiling: 10})
	if _, err := r.conn.Session().Create(context.Background(), r.root+"/corrupt", []byte("not a state"), 0); err != nil {
		t.Fatal(err)
	}
	// Validated in another ZooKeeper epoch: what a leader election leaves.
	st := r.initialise("stale", 400)
	r.put(persist.Record{Name: "stale", Ceiling: 400})
	st.ZKEpoch += 5
	if _, err := r.conn.Session().Set(context.Background(), r.root+"/stale", st.Encode(), -1); err != nil {
		t.Fatal(err)
	}

	want := map[string]struct {
		level  reconcile.Level
		action reconcile.Action
		plan   string
	}{
		"covered":    {reconcile.OK, reconcile.Nothing, ""},
		"uncovered":  {reconcile.Unsafe, reconcile.CoverInStore, "raise the stored ceiling to 500"},
		"above":      {reconcile.Unsafe, reconcile.CoverInStore, "raise the stored ceiling to 800"},
		"lost":       {reconcile.Pending, reconcile.RecreateZnode, "re-create at 701"},
		"registered": {reconcile.Pending, reconcile.Nothing, ""},
		"legacy":     {reconcile.Unsafe, reconcile.CoverInStore, "raise the stored ceiling to 41"},
		"corrupt":    {reconcile.Unsafe, reconcile.Nothing, ""},
		"stale":      {reconcile.Pending, reconcile.Revalidate, "fast-forward to 401 and stamp the current epoch"},
		"gone":       {reconcile.Pending, reconcile.MirrorTombstone, "record the deletion up to 900 in ZooKeeper"},
		"undeleted":  {reconcile.Pending, reconcile.RecordTombstone, "record the tombstone up to 600 in the store"},
		"by-hand":    {reconcile.Pending, reconcile.Nothing, ""},
	}
	rep, err := reconcile.Compare(ctx, r.seqs, r.store)
	if err != nil {
		t.Fatal(err)
	}
	rep.Plan()
	if len(rep.Findings) != len(want) {
		t.Errorf("%d findings, want %d: %+v", len(rep.Findings), len(want), rep.Findings)
	}
	for _, f := range rep.Findings {
		w, ok := want[f.Sequence]
		if !ok {
			t.Errorf("unexpected finding %+v", f)
			continue
		}
		if f.Level != w.level || f.Action != w.action || f.Description != w.plan {
			t.Errorf("%s: %s, action %d %q (%s); want %s, action %d %q", f.Sequence, f.Level, f.Action, f.Description, f.Problem, w.level, w.action, w.plan)
		}
	}
	if got := rep.Unsafe(); got != 4 {
		t.Errorf("Unsafe() = %d, want 4", got)
	}

	if err := reconcile.Apply(ctx, r.seqs, r.store, rep, minReserve); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if want := map[bool]string{true: "done", false: ""}[f.Action != reconcile.Nothing]; f.Outcome != want {
			t.Errorf("%s: outcome %q after Apply; want %q", f.Sequence, f.Outcome, want)
		}
	}

	after := r.compare()
	for name, f := range after {
		if f.Action != reconcile.Nothing || (f.Level == reconcile.Unsafe && name != "corrupt") {
			t.Errorf("after Apply, %s: %s %q, action %d", name, f.Level, f.Problem, f.Action)
		}
	}
	if rec := r.stored("uncovered"); rec.Ceiling != 500 || rec.End != state.MaxID || rec.Start != state.DefaultStart {
		t.Errorf("uncovered: stored %+v; want ceiling 500 with the sequence's space", rec)
	}
	if rec := r.stored("above"); rec.Ceiling != 800 {
		t.Errorf("above: stored ceiling %d, want 800", rec.Ceiling)
	}
	// The counter, the highest ID it may have issued: not the display-only
	// ceiling of a legacy State, which would exhaust the counter at its
	// next restore.
	if rec := r.stored("legacy"); rec.Ceiling != 41 || !rec.Legacy {
		t.Errorf("legacy: stored %+v, want a legacy mark of 41", rec)
	}

	// Re-created and revalidated sequences get the primary's headroom for
	// an idle sequence, covered by the store, and hand out only IDs above
	// everything stored before.
	for _, tt := range []struct {
		name  string
		floor int64
	}{{"lost", 701}, {"stale", 401}} {
		st, _, err := r.seqs.Describe(ctx, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Next != tt.floor || st.Ceiling != tt.floor+headroom-1 {
			t.Errorf("%s: next %d ceiling %d; want %d and %d", tt.name, st.Next, st.Ceiling, tt.floor, tt.floor+headroom-1)
		}
		if rec := r.stored(tt.name); rec.Ceiling < st.Ceiling {
			t.Errorf("%s: stored ceiling %d below ZooKeeper's %d", tt.name, rec.Ceiling, st.Ceiling)
		}
		got, err := r.seqs.Take(ctx, tt.name, 3)
		if err != nil {
			t.Fatalf("%s: take: %v", tt.name, err)
		}
		if got[0].Start != tt.floor {
			t.Errorf("%s: took %s, want from %d", tt.name, got, tt.floor)
		}
	}
	for _, name := range []string{"gone", "undeleted", "by-hand"} {
		if ok, _, _ := r.conn.Session().Exists(context.Background(), r.root+"/"+name); ok {
			t.Errorf("%s was re-created", name)
		}
	}
	if rec := r.stored("undeleted"); !rec.Deleted() || rec.Ceiling != 600 {
		t.Errorf("undeleted: stored %+v; want the tombstone ZooKeeper held", rec)
	}
	if _, ok := after["gone"]; ok {
		t.Errorf("gone: still a finding after Apply wrote ZooKeeper's copy: %+v", after["gone"])
	}
}

// A sequence created by someone else between Compare and Apply (a running
// primary restoring it) is not created twice, and the finding says it was
// not done: restore used to print "re-create at N" either way.
func TestApplySaysWhatItDidNotDo(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.put(persist.Record{Name: "lost", Start: 1, Ceiling: 700}, persist.Record{Name: "raced", Start: 1, Ceiling: 900})
	rep, err := reconcile.Compare(ctx, r.seqs, r.store)
	if err != nil {
		t.Fatal(err)
	}
	rep.Plan()
	r.initialise("raced", 1000) // created meanwhile
	if err := reconcile.Apply(ctx, r.seqs, r.store, rep, 50); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		got[f.Sequence] = f.Description + ": " + f.Outcome
	}
	if got["lost"] != "re-create at 701: done" || !strings.HasPrefix(got["raced"], "re-create at 901: not done: it was created or deleted by someone else meanwhile") {
		t.Fatalf("outcomes %q", got)
	}
	if st, _, err := r.seqs.Describe(ctx, "raced"); err != nil || st.Ceiling != 1000 {
		t.Fatalf("raced: %+v, %v; want the state created meanwhile left alone", st, err)
	}
}

// A report whose only finding is a store tombstone missing from ZooKeeper
// still records the deletion there: nothing has to reach the store first.
func TestApplyMirrorsALoneTombstone(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.put(persist.Record{Name: "gone", Ceiling: 900, Dead: 900})
	rep, err := reconcile.Compare(ctx, r.seqs, r.store)
	if err != nil {
		t.Fatal(err)
	}
	rep.Plan()
	if len(rep.Findings) != 1 || rep.Findings[0].Action != reconcile.MirrorTombstone {
		t.Fatalf("findings %+v; want one tombstone to mirror", rep.Findings)
	}
	if err := reconcile.Apply(ctx, r.seqs, r.store, rep, 50); err != nil {
		t.Fatal(err)
	}
	if f := rep.Findings[0]; f.Outcome != "done" {
		t.Errorf("outcome %q; want done", f.Outcome)
	}
	if left := r.compare(); len(left) != 0 {
		t.Errorf("after Apply: %+v; want nothing left to do", left)
	}
}

// Apply writes nothing to ZooKeeper when the store cannot take the new
// ceilings.
func TestApplyStoreFirst(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.put(persist.Record{Name: "lost", Start: 1, Ceiling: 700})
	rep, err := reconcile.Compare(ctx, r.seqs, r.store)
	if err != nil {
		t.Fatal(err)
	}
	// The store's directory becomes a file: every read and write fails.
	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.dir, []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reconcile.Apply(ctx, r.seqs, r.store, rep, 50); err == nil {
		t.Fatal("Apply succeeded although the store cannot be written")
	}
	if ok, _, _ := r.conn.Session().Exists(context.Background(), r.root+"/lost"); ok {
		t.Fatal("the sequence was re-created although the store did not take its ceiling")
	}
}

// A sequence missing from ZooKeeper with no loss ZooKeeper shows (deleted
// by hand) is left alone, until the operator says it was lost.
func TestRestoreOnTheOperatorsWord(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	epoch, err := r.seqs.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	era, err := r.seqs.Meta().CurrentEra(ctx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	r.put(persist.Record{Name: "by-hand", Live: 1, Start: 1, Ceiling: 300, Seen: era.Value})
	rep, err := reconcile.Compare(ctx, r.seqs, r.store)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || !rep.Findings[0].Unexplained || rep.Findings[0].Action != reconcile.Nothing {
		t.Fatalf("findings: %+v; want by-hand unexplained, no action", rep.Findings)
	}
	if err := rep.MarkLost([]string{"nope"}); err == nil {
		t.Fatal("MarkLost of a name that is not missing: no error")
	}
	if err := rep.MarkLost([]string{"by-hand"}); err != nil {
		t.Fatal(err)
	}
	rep.Plan()
	if err := reconcile.Apply(ctx, r.seqs, r.store, rep, 50); err != nil {
		t.Fatal(err)
	}
	got, err := r.seqs.Take(ctx, "by-hand", 1)
	if err != nil || got[0].Start != 301 {
		t.Fatalf("take after the restore: %s, %v; want 301", got, err)
	}
}
