package persist

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

func newGzip(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

func sampleBucket() *bucketObject {
	const n = 4
	o := &bucketObject{bucket: bucketOf("orders", n), buckets: n, epoch: 9}
	for _, name := range []string{"orders", "a", "b", "c", "d", "e", "naïve", "\x00\xff", `q"uote`, "sp ace", "new\nline"} {
		if bucketOf(name, n) == o.bucket {
			o.recs = append(o.recs, Record{Name: name, Ceiling: 1 << 50, Epoch: 9, Czxid: -1, Mzxid: 1 << 62, Version: -7,
				Legacy: len(name)%2 == 0, Deleted: len(name)%3 == 0, Updated: time.UnixMilli(1767225600123).UTC()})
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
	if !bytes.HasPrefix(data, []byte("seqkeeper-bucket v1\n")) {
		t.Fatalf("header: %q", data[:20])
	}
	got, err := decodeBucket(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBucket(got, o.bucket, o.buckets); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, o)
	}
	// The format is readable after gunzip, for an operator.
	zr, err := gzip.NewReader(bytes.NewReader(data[len("seqkeeper-bucket v1\n"):]))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(zr)
	if !strings.Contains(string(text), `"orders" 1125899906842624 9 -1 4611686018427387904 -7`) {
		t.Fatalf("text form:\n%s", text)
	}
}

func TestSmallObjects(t *testing.T) {
	t.Parallel()
	if n, err := decodeMeta(encodeMeta(300)); n != 300 || err != nil {
		t.Fatalf("meta round trip: %d, %v", n, err)
	}
	e := epochState{epoch: 12, holder: "replica \"1\" 10.0.0.1:8080", updated: time.UnixMilli(1767225600123).UTC(),
		version: epochVersion, checkpoint: 40, swept: 31}
	if got, err := decodeEpoch(encodeEpoch(e)); got != e || err != nil {
		t.Fatalf("epoch round trip: %+v, %v", got, err)
	}
	// An epoch object of the bucket layout: no log yet.
	v1 := "seqkeeper-epoch v1\nepoch 7\nholder \"r1\"\nupdated 5\n"
	if got, err := decodeEpoch([]byte(v1)); err != nil || got.version != 1 || got.epoch != 7 || got.checkpoint != 0 {
		t.Fatalf("version 1 epoch object: %+v, %v", got, err)
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
		{"seqkeeper-store v2\nshards 16\n", ErrNewerFormat},
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
		"seqkeeper-epoch v2\nepoch 1\nholder \"x\"\nupdated 0\ncheckpoint 3\nswept 4\n",
		"seqkeeper-epoch v2\nepoch 1\nholder \"x\"\nupdated 0\ncheckpoint -3\nswept 0\n",
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
	f.Add(data)
	empty, _ := encodeBucket(&bucketObject{bucket: 0, buckets: 1})
	f.Add(empty)
	for _, c := range corruptBuckets(f, 16) {
		f.Add(c)
	}
	f.Add([]byte("seqkeeper-bucket v1\n"))
	f.Fuzz(decodeRoundTrip)
}

// decodeRoundTrip checks that decodeBucket fails only with the package's
// errors and that what it accepts encodes back to the same value.
func decodeRoundTrip(t *testing.T, data []byte) {
	o, err := decodeBucket(data)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("error %v wraps neither ErrCorrupt nor ErrNewerFormat", err)
		}
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
	f.Add([]byte("bucket 0 of 1 epoch 9 records 2\n\"a\" 5 9 -1 7 3 L 1767225600123\n\"b\\x00\" 0 0 0 0 0 LD -5\n"))
	f.Add([]byte("bucket 3 of 4 epoch 0 records 0\n"))
	f.Add([]byte("bucket 0 of 1 epoch 1 records 1\n\"x\" 1 1 1 1 1 - 1 1\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		var buf bytes.Buffer
		buf.WriteString("seqkeeper-bucket v1\n")
		zw := newGzip(&buf)
		zw.Write(text)
		zw.Close()
		decodeRoundTrip(t, buf.Bytes())
	})
}

// FuzzRecordRoundTrip: any record the store accepts survives the format.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("orders", int64(5000), int64(3), int64(0x100000002), int64(0x10000000a), int32(3), true, false, int64(1767225600123))
	f.Add("\x00\xff\"\n", int64(0), int64(0), int64(-1), int64(-1), int32(-1), false, true, int64(-62135596800000))
	f.Fuzz(func(t *testing.T, name string, ceiling, epoch, czxid, mzxid int64, version int32, legacy, deleted bool, ms int64) {
		if name == "" || ceiling < 0 || epoch < 0 {
			return // Put refuses these
		}
		r := Record{Name: name, Ceiling: ceiling, Epoch: epoch, Czxid: czxid, Mzxid: mzxid, Version: version,
			Legacy: legacy, Deleted: deleted, Updated: time.UnixMilli(ms).UTC()}
		o := &bucketObject{bucket: bucketOf(name, 7), buckets: 7, epoch: epoch, recs: []Record{r}}
		data, err := encodeBucket(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeBucket(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if err := checkBucket(got, o.bucket, 7); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, o)
		}
	})
}

// FuzzDecodeSmall: the meta and epoch decoders never panic, and what they
// accept round-trips.
func FuzzDecodeSmall(f *testing.F) {
	f.Add(encodeMeta(256))
	f.Add(encodeEpoch(epochState{epoch: 3, holder: "r1", updated: time.UnixMilli(5).UTC()}))
	f.Add([]byte("seqkeeper-store v2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, err := decodeMeta(data); err == nil {
			if n2, err := decodeMeta(encodeMeta(n)); err != nil || n2 != n {
				t.Fatalf("meta round trip: %d -> %d, %v", n, n2, err)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("meta error %v", err)
		}
		if e, err := decodeEpoch(data); err == nil {
			if e2, err := decodeEpoch(encodeEpoch(e)); err != nil || e2 != e {
				t.Fatalf("epoch round trip: %+v -> %+v, %v", e, e2, err)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("epoch error %v", err)
		}
	})
}
