package seqzk

import (
	"errors"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// FuzzDecodeValue: the parser of the root's own znodes (the era, the
// deletion records) never panics, refuses everything but the one form the
// encoder writes, and round-trips what it accepts.
func FuzzDecodeValue(f *testing.F) {
	fuzztest.Add(f, encodeDeletion(500))
	fuzztest.Add(f, encodeEra(7<<32|12345))
	fuzztest.Add(f, []byte(deletionHeader+"\nceiling 007\n"))
	fuzztest.Add(f, []byte(deletionHeader+"\nceiling -1\n"))
	fuzztest.Add(f, []byte("seqkeeper-deleted v2\nceiling 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, ok := decodeValue(data, deletionHeader, "ceiling"); ok {
			if got := encodeValue(deletionHeader, "ceiling", v); string(got) != string(data) {
				t.Fatalf("%q decodes to %d, which encodes to %q", data, v, got)
			}
		}
		if _, err := decodeDeletion("/r/.seqkeeper/x", data); err != nil && !errors.Is(err, state.ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}
