package transfer

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// exportOf is an export of entries, as Export writes it.
func exportOf(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	for i, v := range append([]any{Header{SeqkeeperExport: Version, Root: "/r", ExportedAt: "2026-01-01T00:00:00Z"}}, anys(entries)...) {
		line, err := marshalLine(v)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		b.Write(line)
	}
	return b.Bytes()
}

func anys(entries []Entry) []any {
	out := make([]any, len(entries))
	for i, e := range entries {
		out[i] = e
	}
	return out
}

// exportSeeds are exports written by the real encoders (entryOf,
// storeOnly, the tombstone entry) and lines that are not quite what they
// write. Each is short: the fuzzer's minimisation of an input takes time
// quadratic in its length.
func exportSeeds(t testing.TB) []fuzztest.Seed {
	t.Helper()
	live := state.State{Name: "orders", Start: 1, Next: 1001, Ceiling: 5000, End: state.MaxID, Windows: 2,
		Recycled: state.Ranges{{Start: 10, End: 20}, {Start: 30, End: 30}}}
	legacy := state.State{Name: "legacy.counter", Legacy: true, Next: 77}
	registered := state.State{Name: "new_one", Registered: true, Start: 100, End: 1000}
	tomb := Entry{Name: "gone", Deleted: true, Ceiling: 900, Recycled: [][2]int64{}}
	header := string(exportOf(t))
	const line = `{"name":"a","deleted":false,"legacy":false,"registered":false,"next":5,"ceiling":9,"start":1,"end":100,"windows":0,"recycled":[[1,2]]}`
	edge := func(name, text string) fuzztest.Seed { return fuzztest.New(name, []byte(header+text+"\n")) }
	return []fuzztest.Seed{
		fuzztest.New("live", exportOf(t, entryOf(live, 4000))),
		fuzztest.New("legacy", exportOf(t, entryOf(legacy, 100))),
		fuzztest.New("registered", exportOf(t, entryOf(registered, 0))),
		fuzztest.New("tombstone", exportOf(t, tomb)),
		fuzztest.New("store-only", exportOf(t, storeOnly(persist.Record{Name: "store-only", Ceiling: 300, Start: 1, End: 1 << 40, Windows: 1}))),
		fuzztest.New("two", exportOf(t, entryOf(legacy, 100), tomb)),
		fuzztest.New("extremes", exportOf(t, entryOf(state.State{Name: "z", Start: state.MaxID, Next: state.MaxID, Ceiling: state.MaxID - 1, End: state.MaxID,
			Windows: state.MaxWindows}, math.MaxInt64))),
		fuzztest.New("header-only", []byte(header)),
		fuzztest.New("empty", []byte{}),
		fuzztest.New("no-header", []byte(line+"\n")),
		fuzztest.New("newer", []byte(`{"seqkeeper_export":2}`+"\n"+line+"\n")),
		fuzztest.New("crlf", []byte(strings.ReplaceAll(header+line+"\n\n"+line+"\n", "\n", "\r\n"))),
		edge("line", line),
		edge("repeated-name", line+"\n"+line),
		edge("trailing-bracket", line+"]"),
		edge("trailing-brace", line+"}"),
		edge("two-objects", line+line),
		edge("duplicate-key", strings.Replace(line, `"next":5`, `"next":5,"next":9`, 1)),
		edge("upper-key", strings.Replace(line, `"name"`, `"NAME"`, 1)),
		edge("unknown-key", strings.Replace(line, `"name"`, `"nom":1,"name"`, 1)),
		edge("triple-range", strings.Replace(line, `[[1,2]]`, `[[1,2,3]]`, 1)),
		edge("single-range", strings.Replace(line, `[[1,2]]`, `[[1]]`, 1)),
		edge("null-next", strings.Replace(line, `"next":5`, `"next":null`, 1)),
		edge("null-windows", strings.Replace(line, `"windows":0`, `"windows":null`, 1)),
		edge("null-range", strings.Replace(line, `[[1,2]]`, `[null]`, 1)),
		edge("minus-zero", strings.Replace(line, `"windows":0`, `"windows":-0`, 1)),
		edge("float", strings.Replace(line, `"next":5`, `"next":5.0`, 1)),
		edge("exponent", strings.Replace(line, `"next":5`, `"next":5e0`, 1)),
		edge("escaped-name", strings.Replace(line, `"a"`, `"\u0061"`, 1)),
		edge("null", "null"),
		edge("array", "[]"),
	}
}

// FuzzParseExport: the export reader never panics and refuses a file that
// is not an export with ErrNotExport; every line it accepts is valid
// (Entry.check), names a sequence no other line names, survives its own
// encoding, and says exactly what the entry holds: a JSON object, nothing
// after it, each key once and spelt as the encoder spells it, each value
// the entry's (a key left out is the zero value). A line it cannot read is
// refused, never read as something else.
func FuzzParseExport(f *testing.F) {
	fuzztest.Corpus(f, exportSeeds(f)...)
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, out, err := parse(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrNotExport) || lines != nil || out != nil {
				t.Fatalf("error %v does not wrap ErrNotExport, or came with lines", err)
			}
			return
		}
		text := strings.Split(string(data), "\n")
		names := map[string]bool{}
		numbers := map[int]bool{}
		for _, o := range out {
			if o.Action != Refused || o.Line < 2 || o.Line > len(text) || numbers[o.Line] {
				t.Fatalf("outcome %+v", o)
			}
			numbers[o.Line] = true
		}
		for _, l := range lines {
			if l.n < 2 || l.n > len(text) || numbers[l.n] || names[l.e.Name] {
				t.Fatalf("line %d (%q) accepted twice, or its name twice", l.n, l.e.Name)
			}
			numbers[l.n], names[l.e.Name] = true, true
			if err := l.e.check(); err != nil {
				t.Fatalf("line %d accepted, but: %v", l.n, err)
			}
			enc, err := marshalLine(l.e)
			if err != nil {
				t.Fatal(err)
			}
			if err := fuzztest.SameJSON(bytes.TrimSpace([]byte(strings.TrimSuffix(text[l.n-1], "\r"))), enc); err != nil {
				t.Fatalf("line %d %q accepted as %+v, which is written %s: %v", l.n, text[l.n-1], l.e, enc, err)
			}
			again, _, err := parse(bytes.NewReader(exportOf(t, l.e)))
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0].e, l.e) {
				t.Fatalf("round trip of %+v: %+v, %v", l.e, again, err)
			}
		}
	})
}
