package persist

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The store's meaning must not depend on the order in which its pieces are
// written, read, folded or re-read: its record merge is the join of a
// lattice. These property tests check the laws on random records drawn
// from small domains (so that ties and collisions are common), and then on
// random histories of writes, compactions and re-applied writes against a
// real file backend.

// genRecord draws a record of name with small values. Its ceiling is at
// least its Dead, as Put makes every record.
func genRecord(name string) *rapid.Generator[Record] {
	return rapid.Custom(func(t *rapid.T) Record {
		r := Record{
			Name:    name,
			Ceiling: rapid.Int64Range(0, 6).Draw(t, "ceiling"),
			Czxid:   rapid.Int64Range(0, 3).Draw(t, "czxid"),
			Mzxid:   rapid.Int64Range(0, 3).Draw(t, "mzxid"),
			Version: rapid.Int32Range(0, 2).Draw(t, "version"),
			Live:    rapid.Int64Range(0, 5).Draw(t, "live"),
			Legacy:  rapid.Bool().Draw(t, "legacy"),
			Start:   rapid.Int64Range(0, 2).Draw(t, "start"),
			End:     rapid.Int64Range(0, 2).Draw(t, "end"),
			Windows: rapid.IntRange(0, 2).Draw(t, "windows"),
			Dead:    rapid.Int64Range(0, 5).Draw(t, "dead"),
			Seen:    rapid.Int64Range(0, 3).Draw(t, "seen"),
			Epoch:   rapid.Int64Range(0, 3).Draw(t, "epoch"),
			Updated: time.UnixMilli(rapid.Int64Range(0, 3).Draw(t, "updated")).UTC(),
		}
		r.Ceiling = max(r.Ceiling, r.Dead)
		return r
	})
}

func TestMergeIsALattice(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := genRecord("s")
		a, b, c := g.Draw(t, "a"), g.Draw(t, "b"), g.Draw(t, "c")
		if m := Merge(a, a); !Equal(m, a) {
			t.Fatalf("not idempotent: Merge(a, a) = %+v, a = %+v", m, a)
		}
		if ab, ba := Merge(a, b), Merge(b, a); !Equal(ab, ba) {
			t.Fatalf("not commutative:\n%+v\n%+v", ab, ba)
		}
		if l, r := Merge(Merge(a, b), c), Merge(a, Merge(b, c)); !Equal(l, r) {
			t.Fatalf("not associative:\n(ab)c %+v\na(bc) %+v", l, r)
		}
		m := Merge(a, b)
		// Nothing either side knew is lost.
		if m.Ceiling < max(a.Ceiling, b.Ceiling) || m.Dead < max(a.Dead, b.Dead) || m.Live < max(a.Live, b.Live) || m.Ceiling < m.Dead {
			t.Fatalf("the join lost knowledge: %+v of %+v and %+v", m, a, b)
		}
		// A deleted incarnation stays deleted: the join is deleted too,
		// or knows a newer incarnation, born above the deletion.
		for _, x := range []Record{a, b} {
			if x.Deleted() && !m.Deleted() && m.Live <= x.Dead {
				t.Fatalf("a deleted incarnation came back: %+v joined into %+v", x, m)
			}
		}
	})
}

// storeModel is what the store must return: the join of every record
// ever written, by name.
type storeModel map[string]Record

func (m storeModel) add(recs []Record) {
	for _, r := range recs {
		if old, ok := m[r.Name]; ok {
			r = Merge(old, r)
		}
		m[r.Name] = r
	}
}

// TestStoreHistoriesAgreeWithTheJoin drives a real store through random
// histories (writes of random records by two stores, compactions by
// either at any point, earlier writes applied again in any order, subsets
// and duplicates included) and checks after every step that Load and Get
// return the join of everything written: folding a prefix and loading the
// rest is loading it all, and no order, repetition or subset of re-applied
// writes changes the view. Across the history, no ceiling goes down and no
// deleted incarnation comes back.
func TestStoreHistoriesAgreeWithTheJoin(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "c", "d"}
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "lattice-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		open := func() *Store {
			b, err := NewFile(dir)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewStore(b, StoreOptions{Buckets: 2, Root: "/r"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		stores := []*Store{open(), open()}
		model := storeModel{}
		var written [][]Record // every batch written, for re-application
		prev := map[string]Record{}
		steps := rapid.IntRange(1, 25).Draw(t, "steps")
		for step := range steps {
			s := stores[rapid.IntRange(0, 1).Draw(t, "store")]
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 5: // a write of new records
				var batch []Record
				for range rapid.IntRange(1, 3).Draw(t, "batch") {
					name := rapid.SampledFrom(names).Draw(t, "name")
					batch = append(batch, genRecord(name).Draw(t, "record"))
				}
				if err := s.Put(ctx, 3, batch...); err != nil {
					t.Fatal(err)
				}
				batch = normalise(batch, 3, time.Now())
				written = append(written, batch)
				model.add(batch)
			case op < 7: // a compaction: folds whatever prefix is logged
				if _, err := s.Compact(ctx, 3); err != nil {
					t.Fatal(err)
				}
			default: // earlier writes again: any subset, any order, repeats
				if len(written) == 0 {
					continue
				}
				var again []Record
				for range rapid.IntRange(1, 4).Draw(t, "again") {
					batch := written[rapid.IntRange(0, len(written)-1).Draw(t, "which")]
					again = append(again, batch[rapid.IntRange(0, len(batch)-1).Draw(t, "one")])
				}
				if err := s.Put(ctx, 3, again...); err != nil {
					t.Fatal(err)
				}
			}
			got, err := open().Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.SortedFunc(maps.Values(model), func(x, y Record) int { return compareNames(x, y) })
			if !equalRecords(got, want) {
				t.Fatalf("step %d: Load\n%s\nthe join of everything written\n%s", step, show(got), show(want))
			}
			for _, r := range got {
				if g, err := open().Get(ctx, r.Name); err != nil || !Equal(g, r) {
					t.Fatalf("step %d: Get(%q) = %+v, %v; Load has %+v", step, r.Name, g, err, r)
				}
				p, seen := prev[r.Name]
				if seen && r.Ceiling < p.Ceiling {
					t.Fatalf("step %d: the ceiling of %q went down from %d to %d", step, r.Name, p.Ceiling, r.Ceiling)
				}
				if seen && p.Deleted() && !r.Deleted() && r.Live <= p.Dead {
					t.Fatalf("step %d: the deleted incarnation of %q came back: %+v after %+v", step, r.Name, r, p)
				}
				prev[r.Name] = r
			}
		}
	})
}

func compareNames(x, y Record) int {
	switch {
	case x.Name < y.Name:
		return -1
	case x.Name > y.Name:
		return 1
	}
	return 0
}

func equalRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, Equal)
}

func show(rs []Record) string {
	var out string
	for _, r := range rs {
		out += fmt.Sprintf("  %+v\n", r)
	}
	return out
}
