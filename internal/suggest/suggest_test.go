package suggest

import (
	"slices"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	names := []string{"orders", "invoices", "users", "order", "runway", "root"}
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"ordres", []string{"orders", "order"}}, // a swap, then a deletion more
		{"orders", []string{"order"}},           // not itself
		{"invoice", []string{"invoices"}},
		{"runwya", []string{"runway"}},
		{"rot", []string{"root"}},
		{"xyz", nil},
		{"ORDERS", []string{"orders", "order"}},
	} {
		if got := Closest(tc.word, names); !slices.Equal(got, tc.want) {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	// A flag both global and a command's is a candidate twice.
	if got := Closest("stor", []string{"store", "root", "store"}); !slices.Equal(got, []string{"store"}) {
		t.Errorf("Closest(stor) among a repeated candidate = %q, want [store]", got)
	}
	if got := Phrase([]string{"a", "b"}, func(s string) string { return "--" + s }); got != ": did you mean --a or --b?" {
		t.Errorf("Phrase = %q", got)
	}
}

func FuzzClosest(f *testing.F) {
	fuzztest.Add(f, "orders", "ordres")
	f.Fuzz(func(t *testing.T, a, b string) {
		if d, e := distance(a, b), distance(b, a); d != e {
			t.Fatalf("distance(%q, %q) = %d but %d the other way", a, b, d, e)
		}
		Closest(a, []string{b})
	})
}
