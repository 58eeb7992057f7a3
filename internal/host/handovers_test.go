package host

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/election"
)

// The handovers a replica keeps: newest first, at most keptHandovers, a
// moment without a primary as null.
func TestHandoversAreBoundedNewestFirst(t *testing.T) {
	var h Handovers
	if got := h.List(); got == nil || len(got) != 0 {
		t.Fatalf("no handovers yet: %#v, want an empty list (JSON [])", got)
	}
	start := time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
	h.record(start, election.Identity{})
	for i := range keptHandovers + 3 {
		h.record(start.Add(time.Duration(i+1)*time.Second), election.Identity{ID: string(rune('a' + i)), Address: "x:7070"})
	}
	got := h.List()
	if len(got) != keptHandovers {
		t.Fatalf("%d handovers kept, want %d", len(got), keptHandovers)
	}
	for i, v := range got {
		want := string(rune('a' + keptHandovers + 2 - i))
		if v.Primary == nil || v.Primary.ID != want || i > 0 && !v.At.Before(got[i-1].At) {
			t.Fatalf("handover %d: %+v, want primary %s, newest first", i, v, want)
		}
	}
	var none Handovers
	none.record(start, election.Identity{})
	b, err := json.Marshal(none.List())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"primary":null`) {
		t.Errorf("a moment without a primary: %s, want \"primary\":null", b)
	}
}
