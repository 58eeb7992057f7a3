package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

func newGzip(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

func sampleBucket() *bucketObject {
	const n = 4
	o := &bucketObject{bucket: bucketOf("orders", n), buckets: n, epoch: 9, root: "/all \"sequences\""}
	for _, name := range []string{"orders", "a", "b", "c", "d", "e", "naïve", "\x00\xff", `q"uote`, "sp ace", "new\nline"} {
		if bucketOf(name, n) == o.bucket {
			o.recs = append(o.recs, Record{Name: name, Ceiling: 1 << 50, Epoch: 9, Czxid: -1, Mzxid: 1 << 62, Version: -7,
				Live: int64(len(name)), Dead: int64(len(name) % 3), Seen: 7<<32 | 12345, Start: 1, End: 1 << 60, Windows: 3,
				Legacy: len(name)%2 == 0, Updated: time.UnixMilli(1767225600123).UTC()})
		}
	}
	sortRecords(o.recs)
	return o
}

func sortRecords(rs []Record) {
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[j].Name < rs[i].Name {
				rs[i], rs[j] = rs[j], rs[i]
			}
		}
	}
}

func TestBucketRoundTrip(t *testing.T) {
	t.Parallel()
	o := sampleBucket()
	if len(o.recs) < 2 {
		t.Fatalf("sample has %d records", len(o.recs))
	}
	data, err := encodeBucket(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("seqkeeper-bucket v2\n")) {
		t.Fatalf("header: %q", data[:20])
	}
	got, err := decodeBucket(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBucket(got, o.bucket, o.buckets, o.root); err != nil {
		t.Fatal(err)
	}
	if err := checkBucket(got, o.bucket, o.buckets, "/other"); !errors.Is(err, ErrOtherRoot) {
		t.Fatalf("a bucket of another root: %v", err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, o)
	}
	// The format is readable after gunzip, for an operator.
	zr, err := gzip.NewReader(bytes.NewReader(data[len("seqkeeper-bucket v2\n"):]))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(zr)
	if !strings.Contains(string(text), `"orders" 1125899906842624 -1 4611686018427387904 -7 6 0 30064783417 9 L 1767225600123 1 1152921504606846976 3`) ||
		!strings.HasPrefix(string(text), `bucket 0 of 4 epoch 9 records 4 root "/all \"sequences\""`) {
		t.Fatalf("text form:\n%s", text)
	}
}

// TestReadVersion1Records: a record of format v1 (no incarnation) reads as
// a live sequence of unknown birth, or a tombstone up to its ceiling.
func TestReadVersion1Records(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want Record
	}{
		{`"a" 500 3 7 9 2 - 1767225600000 1 100 0`,
			Record{Name: "a", Ceiling: 500, Epoch: 3, Czxid: 7, Mzxid: 9, Version: 2, Live: 1, Start: 1, End: 100, Updated: time.UnixMilli(1767225600000).UTC()}},
		{`"b" 40 3 7 9 2 D 1767225600000 0 0 0`,
			Record{Name: "b", Ceiling: 40, Dead: 40, Epoch: 3, Czxid: 7, Mzxid: 9, Version: 2, Updated: time.UnixMilli(1767225600000).UTC()}},
		{`"c" 0 3 0 0 0 D 1767225600000 0 0 0`,
			Record{Name: "c", Ceiling: 1, Dead: 1, Epoch: 3, Updated: time.UnixMilli(1767225600000).UTC()}},
		{`"d" 77 3 7 9 2 LD 1767225600000 0 0 0`,
			Record{Name: "d", Ceiling: 77, Dead: 77, Legacy: true, Epoch: 3, Czxid: 7, Mzxid: 9, Version: 2, Updated: time.UnixMilli(1767225600000).UTC()}},
	} {
		got, err := parseRecordV1([]byte(tc.line))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseRecordV1(%s) = %+v, %v\nwant %+v", tc.line, got, err, tc.want)
		}
		if got.Deleted() != (tc.want.Dead > 0) {
			t.Errorf("%s: Deleted() = %v", tc.line, got.Deleted())
		}
	}
}

func TestSmallObjects(t *testing.T) {
	t.Parallel()
	m := metaState{buckets: 300, root: "/a", version: metaVersion}
	if got, err := decodeMeta(encodeMeta(m)); got != m || err != nil {
		t.Fatalf("meta round trip: %+v, %v", got, err)
	}
	if got, err := decodeMeta([]byte("seqkeeper-store v1\nbuckets 16\n")); err != nil || got != (metaState{buckets: 16, version: 1}) {
		t.Fatalf("meta of format v1: %+v, %v", got, err)
	}
	e := epochState{epoch: 12, holder: "replica \"1\" 10.0.0.1:8080", updated: time.UnixMilli(1767225600123).UTC(), version: epochVersion}
	if got, err := decodeEpoch(encodeEpoch(e)); got != e || err != nil {
		t.Fatalf("epoch round trip: %+v, %v", got, err)
	}
	// Epoch objects of the bucket layout and of the checkpointed log.
	v1 := "seqkeeper-epoch v1\nepoch 7\nholder \"r1\"\nupdated 5\n"
	if got, err := decodeEpoch([]byte(v1)); err != nil || got.version != 1 || got.epoch != 7 {
		t.Fatalf("version 1 epoch object: %+v, %v", got, err)
	}
	v2 := "seqkeeper-epoch v2\nepoch 8\nholder \"r1\"\nupdated 5\ncheckpoint 40\nswept 31\n"
	if got, err := decodeEpoch([]byte(v2)); err != nil || got.version != 2 || got.epoch != 8 {
		t.Fatalf("version 2 epoch object: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		data string
		want error
	}{
		{"seqkeeper-store v1\nbuckets 0\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 99999999\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 016\n", ErrCorrupt},
		{"seqkeeper-store v1\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 16\nbuckets 16\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 16\nextra 1\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 16", ErrCorrupt},
		{"seqkeeper-store v0\nbuckets 16\n", ErrCorrupt},
		{"seqkeeper-store v2\nbuckets 16\n", ErrCorrupt},
		{"seqkeeper-store v1\nbuckets 16\nroot \"/a\"\n", ErrCorrupt},
		{"seqkeeper-store v2\nbuckets 16\nroot /a\n", ErrCorrupt},
		{"seqkeeper-store v3\nshards 16\n", ErrNewerFormat},
		{"seqkeeper-epoch v1\nepoch 1\nholder \"x\"\nupdated 0\n", ErrCorrupt}, // wrong magic
		{"", ErrCorrupt},
	} {
		if _, err := decodeMeta([]byte(tc.data)); !errors.Is(err, tc.want) {
			t.Errorf("decodeMeta(%q) = %v, want %v", tc.data, err, tc.want)
		}
	}
	for _, data := range []string{
		"seqkeeper-epoch v1\nepoch -1\nholder \"x\"\nupdated 0\n",
		"seqkeeper-epoch v1\nepoch 1\nholder x\nupdated 0\n",
		"seqkeeper-epoch v1\nepoch 1\nholder \"x\"\n",
		"seqkeeper-epoch v1\nepoch 1\nholder \"x\"\nupdated 0\ncheckpoint 3\nswept 0\n",
		"seqkeeper-epoch v2\nepoch 1\nholder \"x\"\nupdated 0\n",
		"seqkeeper-epoch v2\nepoch 1\nholder \"x\"\nupdated 0\ncheckpoint -3\nswept 0\n",
		"seqkeeper-epoch v3\nepoch 1\nholder \"x\"\nupdated 0\ncheckpoint 3\nswept 0\n",
	} {
		if _, err := decodeEpoch([]byte(data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeEpoch(%q) = %v, want ErrCorrupt", data, err)
		}
	}
}

// FuzzDecodeBucket: the decoder never panics, and whatever it accepts
// encodes back to something it decodes to the same value.
func FuzzDecodeBucket(f *testing.F) {
	data, err := encodeBucket(sampleBucket())
	if err != nil {
		f.Fatal(err)
	}
	fuzztest.Add(f, data)
	empty, _ := encodeBucket(&bucketObject{bucket: 0, buckets: 1})
	fuzztest.Add(f, empty)
	for _, c := range corruptBuckets(f, 16) {
		fuzztest.Add(f, c)
	}
	fuzztest.Add(f, []byte("seqkeeper-bucket v1\n"))
	fuzztest.Add(f, []byte("seqkeeper-bucket v2\n"))
	f.Fuzz(decodeRoundTrip)
}

// decodeRoundTrip checks that decodeBucket fails only with the package's
// errors and that what it accepts encodes back to the same value.
func decodeRoundTrip(t *testing.T, data []byte) {
	o, err := decodeBucket(data)
	if refused(t, err) {
		return
	}
	enc, err := encodeBucket(o)
	if err != nil {
		t.Fatal(err)
	}
	o2, err := decodeBucket(enc)
	if err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	if !reflect.DeepEqual(o, o2) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", o2, o)
	}
}

// FuzzDecodeBucketText is FuzzDecodeBucket with the gzip layer done by the
// harness, so the fuzzer explores the text inside rather than gzip's
// checksums.
func FuzzDecodeBucketText(f *testing.F) {
	fuzztest.Add(f, 1, []byte("bucket 0 of 1 epoch 9 records 2\n\"a\" 5 9 -1 7 3 L 1767225600123 1 0 0\n\"b\\x00\" 0 0 0 0 0 LD -5 0 0 0\n"))
	fuzztest.Add(f, 1, []byte("bucket 3 of 4 epoch 0 records 0\n"))
	fuzztest.Add(f, 2, []byte("bucket 0 of 1 epoch 9 records 1 root \"/r\"\n\"a\" 5 -1 7 3 1 0 0 9 L 1767225600123 1 0 0\n"))
	fuzztest.Add(f, 2, []byte("bucket 0 of 1 epoch 1 records 1 root \"\"\n\"x\" 1 1 1 1 1 1 1 1 - 1 1 1 1\n"))
	f.Fuzz(func(t *testing.T, version int, text []byte) {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "seqkeeper-bucket v%d\n", version)
		zw := newGzip(&buf)
		zw.Write(text)
		zw.Close()
		decodeRoundTrip(t, buf.Bytes())
	})
}

// FuzzRecordRoundTrip: any record the store accepts survives the format.
func FuzzRecordRoundTrip(f *testing.F) {
	fuzztest.Add(f, "orders", int64(5000), int64(3), int64(0x100000002), int64(0x10000000a), int32(3), int64(1), int64(0), int64(3<<32), true, int64(1767225600123))
	fuzztest.Add(f, "\x00\xff\"\n", int64(0), int64(0), int64(-1), int64(-1), int32(-1), int64(0), int64(0), int64(0), false, int64(-62135596800000))
	f.Fuzz(func(t *testing.T, name string, ceiling, epoch, czxid, mzxid int64, version int32, live, dead, seen int64, legacy bool, ms int64) {
		if name == "" || ceiling < 0 || epoch < 0 || live < 0 || dead < 0 || dead > ceiling {
			return // Put refuses these (and raises the ceiling to dead)
		}
		r := Record{Name: name, Ceiling: ceiling, Epoch: epoch, Czxid: czxid, Mzxid: mzxid, Version: version,
			Live: live, Dead: dead, Seen: seen, Legacy: legacy, Updated: time.UnixMilli(ms).UTC()}
		o := &bucketObject{bucket: bucketOf(name, 7), buckets: 7, epoch: epoch, root: name, recs: []Record{r}}
		data, err := encodeBucket(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeBucket(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if err := checkBucket(got, o.bucket, 7, name); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, o)
		}
	})
}

// FuzzDecodeSmall: the meta and epoch decoders never panic, and what they
// accept round-trips. A meta object is accepted only as its writer wrote
// it, byte for byte (FuzzDecodeEpoch holds the epoch object to the same).
func FuzzDecodeSmall(f *testing.F) {
	fuzztest.Add(f, encodeMeta(metaState{buckets: 256, root: "/all-sequences"}))
	fuzztest.Add(f, encodeEpoch(epochState{epoch: 3, holder: "r1", updated: time.UnixMilli(5).UTC()}))
	fuzztest.Add(f, []byte("seqkeeper-store v2\n"))
	fuzztest.Add(f, []byte("seqkeeper-store v1\nbuckets 16\n"))
	fuzztest.Add(f, []byte("seqkeeper-epoch v2\nepoch 8\nholder \"r1\"\nupdated 5\ncheckpoint 40\nswept 31\n"))
	fuzztest.Add(f, []byte("seqkeeper-store v2\nroot \"/a\"\nbuckets 16\n"))
	fuzztest.Add(f, []byte("seqkeeper-store v2\nbuckets 16\nroot \"\\x2fa\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := decodeMeta(data); err == nil {
			written := encodeMeta(m)
			if m.version == 1 {
				written = encodeFields(metaMagic, 1, "buckets", strconv.Itoa(m.buckets))
			}
			if !bytes.Equal(written, data) {
				t.Fatalf("meta %q accepted as %+v, which its writer writes as %q", data, m, written)
			}
			m.version = metaVersion // what encodeMeta writes
			if m2, err := decodeMeta(encodeMeta(m)); err != nil || m2 != m {
				t.Fatalf("meta round trip: %+v -> %+v, %v", m, m2, err)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("meta error %v", err)
		}
		if e, err := decodeEpoch(data); err == nil {
			e.version = epochVersion
			if e2, err := decodeEpoch(encodeEpoch(e)); err != nil || e2 != e {
				t.Fatalf("epoch round trip: %+v -> %+v, %v", e, e2, err)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("epoch error %v", err)
		}
	})
}
