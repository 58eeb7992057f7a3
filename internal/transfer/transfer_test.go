package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const minReserve = 50

// root is a sequences root on the shared real ZooKeeper and a file store.
type root struct {
	t     *testing.T
	seqs  *seqzk.Client
	store *persist.Store
}

func newRoot(t *testing.T, z *testenv.ZK, name string) *root {
	t.Helper()
	zc, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{SessionTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	r := &root{t: t}
	path := z.Path(name)
	if err := testenv.CreateAll(zc, path); err != nil {
		t.Fatal(err)
	}
	if r.seqs, err = seqzk.NewClient(zc, seqzk.Options{Root: path, CeilingWait: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = persist.NewStore(b, persist.StoreOptions{Buckets: 16}); err != nil {
		t.Fatal(err)
	}
	return r
}

// sequence registers name and gives it ceiling, store first, as the
// primary would.
func (r *root) sequence(name string, reg seqzk.Registration, ceiling int64) {
	r.t.Helper()
	ctx := context.Background()
	if err := r.seqs.Register(ctx, name, reg); err != nil {
		r.t.Fatal(err)
	}
	if err := seqzk.PutAtCurrentEpoch(ctx, r.store, persist.Record{Name: name, Ceiling: ceiling, Start: reg.Start, End: reg.End, Windows: reg.Windows}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.seqs.Keeper().Revalidate(ctx, name, 0, ceiling); err != nil {
		r.t.Fatal(err)
	}
}

func (r *root) take(name string, n int64) state.Ranges {
	r.t.Helper()
	got, err := r.seqs.Take(context.Background(), name, n)
	if err != nil {
		r.t.Fatalf("take %d of %q: %v", n, name, err)
	}
	return got
}

func (r *root) export() (string, map[string]transfer.Entry) {
	r.t.Helper()
	var b bytes.Buffer
	if _, err := transfer.Export(context.Background(), r.seqs, r.store, &b); err != nil {
		r.t.Fatal(err)
	}
	entries := map[string]transfer.Entry{}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var h transfer.Header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.SeqkeeperExport != transfer.Version {
		r.t.Fatalf("header %q: %v", lines[0], err)
	}
	for _, l := range lines[1:] {
		var e transfer.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			r.t.Fatalf("line %q: %v", l, err)
		}
		entries[e.Name] = e
	}
	return b.String(), entries
}

func (r *root) importText(text string) map[string]transfer.Outcome {
	r.t.Helper()
	out, err := transfer.Import(context.Background(), r.seqs, r.store, strings.NewReader(text), transfer.ImportOptions{MinReserve: minReserve})
	if err != nil {
		r.t.Fatal(err)
	}
	byName := map[string]transfer.Outcome{}
	for _, o := range out {
		byName[o.Name] = o
	}
	return byName
}

func actions(out map[string]transfer.Outcome) map[string]string {
	m := map[string]string{}
	for n, o := range out {
		m[n] = o.Action
	}
	return m
}

// A root moved to a new ensemble root and a new store: every kind of
// sequence and a tombstone travel; the moved sequences hand out only IDs
// above everything the source may have issued, with the store covering
// them first; importing again changes nothing.
func TestExportImportMovesARoot(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	src, dst := newRoot(t, z, "src"), newRoot(t, z, "dst")
	ctx := context.Background()

	src.sequence("plain", seqzk.Registration{}, 300)
	took := src.take("plain", 30)
	if err := src.seqs.Push(ctx, "plain", state.Ranges{{Start: took[0].Start, End: took[0].Start + 4}}); err != nil {
		t.Fatal(err)
	}
	src.sequence("win", seqzk.Registration{Start: 1000, Windows: 2}, 5000)
	src.take("win", 10)
	src.sequence("bounded", seqzk.Registration{Start: 1, End: 100}, 60)
	src.take("bounded", 40)
	src.sequence("gone", seqzk.Registration{}, 900)
	src.take("gone", 5)
	if _, err := src.seqs.Operator().Delete(ctx, "gone", src.store); err != nil {
		t.Fatal(err)
	}
	if err := seqzk.PutAtCurrentEpoch(ctx, src.store, persist.Record{Name: "lost", Ceiling: 700, Start: 1}); err != nil {
		t.Fatal(err)
	}
	if err := src.seqs.Register(ctx, "fresh", seqzk.Registration{Start: 10}); err != nil {
		t.Fatal(err)
	}

	text, e := src.export()
	if p := e["plain"]; p.Next != 31 || p.Ceiling != 300 || len(p.Recycled) != 1 || p.Recycled[0] != [2]int64{1, 5} {
		t.Errorf("plain exported as %+v", p)
	}
	if g := e["gone"]; !g.Deleted || g.Ceiling != 900 {
		t.Errorf("gone exported as %+v, want a tombstone at 900", g)
	}
	if l := e["lost"]; l.Deleted || l.Next != 701 || l.Ceiling != 700 {
		t.Errorf("lost (only in the store) exported as %+v", l)
	}
	if f := e["fresh"]; !f.Registered || f.Start != 10 {
		t.Errorf("fresh (a registration) exported as %+v", f)
	}
	if w := e["win"]; w.Windows != 2 || w.Start != 1000 || w.Ceiling != 5000 {
		t.Errorf("win exported as %+v", w)
	}

	got := actions(dst.importText(text))
	want := map[string]string{"plain": transfer.Created, "win": transfer.Created, "bounded": transfer.Created,
		"gone": transfer.Tombstoned, "lost": transfer.Created, "fresh": transfer.Created}
	for n, a := range want {
		if got[n] != a {
			t.Errorf("import of %q: %s, want %s", n, got[n], a)
		}
	}
	// Above the exported ceilings, covered by the store first.
	for name, floor := range map[string]int64{"plain": 301, "win": 5001, "bounded": 61, "lost": 701, "fresh": 10} {
		ids := dst.take(name, 3)
		rec, err := dst.store.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if ids[0].Start < floor || ids[len(ids)-1].End > rec.Ceiling {
			t.Errorf("%s: took %s in the target: want at least %d, at most the stored ceiling %d", name, ids, floor, rec.Ceiling)
		}
	}
	if rec, err := dst.store.Get(ctx, "gone"); err != nil || !rec.Deleted() || rec.Ceiling != 900 {
		t.Errorf("tombstone in the target: %+v, %v", rec, err)
	}
	if ok, _, _ := dst.seqs.ZK().Session().Exists(ctx, dst.seqs.Path("gone")); ok {
		t.Error("a tombstone created a znode")
	}

	// Again: nothing changes.
	for n, o := range dst.importText(text) {
		if o.Action != transfer.Unchanged {
			t.Errorf("second import of %q: %s (%s), want unchanged", n, o.Action, o.Reason)
		}
	}

	// Into the source itself: its live sequences move above the export.
	back := actions(src.importText(text))
	if back["plain"] != transfer.Advanced || back["gone"] != transfer.Unchanged {
		t.Errorf("import into the source: %v", back)
	}
	if ids := src.take("plain", 1); ids[0].Start < 301 {
		t.Errorf("source's plain hands out %s after importing its own export (ceiling 300)", ids)
	}
}

// Lines that would break the target are refused, the others imported, and
// input that is not an export changes nothing.
func TestImportRefuses(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dst := newRoot(t, z, "dst")
	ctx := context.Background()
	dst.sequence("live", seqzk.Registration{}, 100)
	dst.sequence("alive", seqzk.Registration{}, 100)
	if err := seqzk.PutAtCurrentEpoch(ctx, dst.store, persist.Record{Name: "dead", Ceiling: 50, Dead: 50}); err != nil {
		t.Fatal(err)
	}
	const header = `{"seqkeeper_export":1,"root":"/x","exported_at":"2026-11-25T00:00:00Z"}`
	seq := func(name string, start int64) string {
		return `{"name":"` + name + `","deleted":false,"legacy":false,"registered":false,"next":20,"ceiling":200,"start":` +
			jsonInt(start) + `,"end":9223372036854775807,"windows":0,"recycled":[]}`
	}
	text := strings.Join([]string{
		header,
		seq("live", 5), // other settings
		`{"name":"alive","deleted":true,"ceiling":10}`, // a tombstone of a live name
		seq("dead", 1),            // revives a deleted name
		`{"name":"broken"`,        // not JSON
		`{"name":"x","colour":1}`, // unknown field
		seq("bad/name", 1),
		seq("new", 1),
		seq("new", 1), // twice
		`{"name":"back","deleted":false,"legacy":false,"registered":false,"next":20,"ceiling":5,"start":1,"end":100,"windows":0,"recycled":[]}`,
	}, "\n")
	out, err := transfer.Import(ctx, dst.seqs, dst.store, strings.NewReader(text), transfer.ImportOptions{MinReserve: minReserve})
	if err != nil {
		t.Fatal(err)
	}
	byLine := map[int]transfer.Outcome{}
	for _, o := range out {
		byLine[o.Line] = o
	}
	for line, want := range map[int]string{2: "settings differ", 3: "live in the target", 4: "deleted in the target",
		5: "unexpected", 6: "unknown field", 7: "invalid", 9: "already on line 8", 10: "below next-1"} {
		o := byLine[line]
		if o.Action != transfer.Refused || !strings.Contains(o.Reason, want) {
			t.Errorf("line %d: %s %q, want refused naming %q", line, o.Action, o.Reason, want)
		}
	}
	if o := byLine[8]; o.Action != transfer.Created {
		t.Errorf("line 8 (new): %+v, want created", o)
	}
	if st, _, err := dst.seqs.Describe(ctx, "live"); err != nil || st.Start != 1 || st.Next != 1 {
		t.Errorf("a refused line changed live: %+v %v", st, err)
	}
	if ok, _, _ := dst.seqs.ZK().Session().Exists(ctx, dst.seqs.Path("dead")); ok {
		t.Error("a deleted name came back")
	}

	for _, bad := range []string{"", "not json\n", `{"name":"a"}` + "\n", `{"seqkeeper_export":2}` + "\n"} {
		if _, err := transfer.Import(ctx, dst.seqs, dst.store, strings.NewReader(bad), transfer.ImportOptions{}); !errors.Is(err, transfer.ErrNotExport) {
			t.Errorf("import of %q: %v, want ErrNotExport", bad, err)
		}
	}
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

// An exhausted sequence whose stored ceiling lies past its end (a
// tombstone of an exhausted incarnation ends the next ID too) is created
// exhausted by the import, and a second import accepts the line rather
// than try to advance it past its end: an exhausted sequence is at or
// past any export.
func TestImportExhaustedAboveItsEnd(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	src, dst := newRoot(t, z, "src"), newRoot(t, z, "dst")
	src.sequence("b", seqzk.Registration{Start: 10, End: 20}, 20)
	src.take("b", 11)
	// The store holds more than the space: what a tombstone of an
	// exhausted incarnation leaves for the one after it.
	if err := seqzk.PutAtCurrentEpoch(context.Background(), src.store, persist.Record{Name: "b", Ceiling: 21}); err != nil {
		t.Fatal(err)
	}
	text, e := src.export()
	if e["b"].Ceiling != 21 {
		t.Fatalf("exported %+v; want the stored ceiling 21", e["b"])
	}
	if got := actions(dst.importText(text)); got["b"] != transfer.Created {
		t.Fatalf("first import: %v", got)
	}
	if got := actions(dst.importText(text)); got["b"] != transfer.Unchanged {
		t.Fatalf("second import: %v; want b unchanged", got)
	}
}
