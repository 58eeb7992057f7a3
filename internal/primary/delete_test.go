package primary_test

import (
	"encoding/binary"
	"testing"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/internal/primary"
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
	} {
		if got := primary.TombstoneCeiling(tt.st); got != tt.want {
			t.Errorf("%s: tombstone ceiling %d, want %d", tt.name, got, tt.want)
		}
	}
}
