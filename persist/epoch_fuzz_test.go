package persist

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

// epochOf is the epoch object's value, as decodeEpoch returns it.
func epochOf(epoch int64, holder string, ms int64) epochState {
	return epochState{epoch: epoch, holder: holder, updated: time.UnixMilli(ms).UTC(), version: epochVersion}
}

// epochFields is what a writer of format version writes before the
// fields of v2's checkpoint (which v1 and v3 do not have).
func epochFields(version int, e epochState) []byte {
	return encodeFields(epochMagic, version,
		"epoch", strconv.FormatInt(e.epoch, 10),
		"holder", strconv.Quote(e.holder),
		"updated", strconv.FormatInt(e.updated.UnixMilli(), 10))
}

// checkpointLines is the rest of an epoch object of format v2.
var checkpointLines = regexp.MustCompile(`^checkpoint (0|[1-9][0-9]*)\nswept (0|[1-9][0-9]*)\n$`)

// FuzzDecodeEpoch: the epoch object's decoder never panics and fails only
// with ErrCorrupt or ErrNewerFormat; what it accepts is byte for byte what
// the writer of its format version writes for the value it returns (in
// the current version, encodeEpoch), so no other spelling of an epoch, a
// holder or a time is read as one; and the value survives encodeEpoch.
func FuzzDecodeEpoch(f *testing.F) {
	v1, err := os.ReadFile("testdata/v1-store/epoch")
	if err != nil {
		f.Fatal(err)
	}
	v2, err := os.ReadFile("testdata/v2-store/epoch")
	if err != nil {
		f.Fatal(err)
	}
	fuzztest.Corpus(f,
		fuzztest.New("current", encodeEpoch(epochOf(12, "replica \"1\" 10.0.0.1:8080", 1767225600123))),
		fuzztest.New("zero", encodeEpoch(epochOf(0, "", 0))),
		fuzztest.New("extremes", encodeEpoch(epochOf(math.MaxInt64, "\x00\xff\n", math.MinInt64))),
		fuzztest.New("v1-store", v1),
		fuzztest.New("v2-store", v2),
		fuzztest.New("escaped-holder", []byte("seqkeeper-epoch v3\nepoch 1\nholder \"\\x72\"\nupdated 5\n")),
		fuzztest.New("plus-time", []byte("seqkeeper-epoch v3\nepoch 1\nholder \"r\"\nupdated +5\n")),
		fuzztest.New("zero-time", []byte("seqkeeper-epoch v3\nepoch 1\nholder \"r\"\nupdated 05\n")),
		fuzztest.New("reordered", []byte("seqkeeper-epoch v3\nholder \"r\"\nepoch 1\nupdated 5\n")),
		fuzztest.New("v2-no-checkpoint", []byte("seqkeeper-epoch v2\nepoch 1\nholder \"r\"\nupdated 5\n")),
		fuzztest.New("v3-checkpoint", []byte("seqkeeper-epoch v3\nepoch 1\nholder \"r\"\nupdated 5\ncheckpoint 3\nswept 1\n")),
		fuzztest.New("negative", []byte("seqkeeper-epoch v3\nepoch -1\nholder \"r\"\nupdated 5\n")),
		fuzztest.New("crlf", []byte("seqkeeper-epoch v3\r\nepoch 1\r\nholder \"r\"\r\nupdated 5\r\n")),
		fuzztest.New("newer", []byte("seqkeeper-epoch v4\nterm 1\n")),
		fuzztest.New("meta", encodeMeta(metaState{buckets: 256, root: "/all-sequences"})),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEpoch(data)
		if refused(t, err) {
			return
		}
		if e.epoch < 0 || e.version < 1 || e.version > epochVersion {
			t.Fatalf("accepted %q as %+v", data, e)
		}
		written := epochFields(e.version, e)
		if e.version == 2 {
			rest, ok := bytes.CutPrefix(data, written)
			if !ok || !checkpointLines.Match(rest) {
				t.Fatalf("accepted %q as %+v, which a v2 writer writes as %q and a checkpoint", data, e, written)
			}
		} else if !bytes.Equal(written, data) {
			t.Fatalf("accepted %q as %+v, which its writer writes as %q", data, e, written)
		}
		e.version = epochVersion
		if again, err := decodeEpoch(encodeEpoch(e)); err != nil || again != e {
			t.Fatalf("round trip of %+v: %+v, %v", e, again, err)
		}
	})
}
