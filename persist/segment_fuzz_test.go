package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

// sampleSegment is a log segment as a primary writes one.
func sampleSegment() *segment {
	o := sampleBucket()
	return &segment{pos: 42, epoch: o.epoch, writer: 0x9f86d081884c7d65, root: "/all-sequences", recs: o.recs}
}

// mustEncodeSegment is encodeSegment for seeds.
func mustEncodeSegment(t testing.TB, sg *segment) []byte {
	t.Helper()
	data, err := encodeSegment(sg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// gzipObject is an object of the bucket layout around text: the line
// "<magic> v<version>", then text gzipped.
// Its writers are pooled: a new one costs a millisecond (its compressor
// state), which slows the fuzzer's minimisation of an input a hundredfold.
func gzipObject(magic string, version int, text string) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s v%d\n", magic, version)
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		zw = newGzip(&buf)
	} else {
		zw.Reset(&buf)
	}
	defer gzipWriters.Put(zw)
	zw.Write([]byte(text))
	zw.Close()
	return buf.Bytes()
}

var gzipWriters sync.Pool

// objectText splits an object of the bucket layout into its first line and
// the text of its gzip stream.
func objectText(t testing.TB, data []byte) (first, text []byte) {
	t.Helper()
	first, rest, _ := bytes.Cut(data, []byte{'\n'})
	zr, err := gzip.NewReader(bytes.NewReader(rest))
	if err != nil {
		t.Fatal(err)
	}
	if text, err = io.ReadAll(zr); err != nil {
		t.Fatal(err)
	}
	return first, text
}

// segmentTexts are the texts of log segments (inside the gzip stream) of
// formats v1 and v2: written by encodeSegment, and edge cases. They are
// short: the fuzzer's minimisation of an input takes time quadratic in
// its length.
func segmentTexts(t testing.TB) []fuzztest.Seed {
	t.Helper()
	encoded := func(sg *segment) []byte {
		_, text := objectText(t, mustEncodeSegment(t, sg))
		return text
	}
	const head = "segment 7 epoch 3 writer 00000000000000ff records "
	return []fuzztest.Seed{
		fuzztest.New("one", logVersion, encoded(&segment{pos: 42, epoch: 9, writer: 0x9f86d081884c7d65, root: "/all-sequences",
			recs: []Record{{Name: "orders", Ceiling: 5000, Czxid: 4294967298, Mzxid: 4294967310, Version: 3, Live: 1, Seen: 7 << 32,
				Epoch: 7, Updated: time.UnixMilli(1767225600000).UTC(), Start: 1, End: 1 << 40, Windows: 2}}})),
		fuzztest.New("seal", logVersion, encoded(&segment{pos: 1})),
		fuzztest.New("extremes", logVersion, encoded(&segment{pos: math.MaxInt64, epoch: math.MaxInt64, writer: math.MaxUint64, root: "\x00\"\n",
			recs: []Record{{Name: "\xff", Ceiling: math.MaxInt64, Dead: math.MaxInt64, Epoch: math.MaxInt64, Czxid: math.MinInt64,
				Version: math.MinInt32, Live: math.MaxInt64, Seen: math.MinInt64, End: math.MaxInt64, Windows: math.MaxInt32, Legacy: true,
				Updated: time.UnixMilli(math.MinInt64).UTC()}}})),
		fuzztest.New("v1", 1, []byte(head+"2\n"+`"a" 500 3 7 9 2 - 1767225600000 1 100 0`+"\n"+`"b" 40 3 7 9 2 LD 1767225600000 0 0 0`+"\n")),
		fuzztest.New("v1-root", 1, []byte(head+"0 root \"\"\n")),
		fuzztest.New("no-root", 2, []byte(head+"0\n")),
		fuzztest.New("upper-hex", 2, []byte("segment 7 epoch 3 writer 00000000000000FF records 0 root \"\"\n")),
		fuzztest.New("plus", 2, []byte("segment +7 epoch 3 writer 00000000000000ff records 0 root \"\"\n")),
		fuzztest.New("escaped-name", 2, []byte(head+"1 root \"/r\"\n"+`"\x61" 5 0 0 0 1 0 0 3 - 0 1 0 0`+"\n")),
		fuzztest.New("escaped-root", 2, []byte(head+"0 root \"\\x2f\"\n")),
		fuzztest.New("epoch-above", 2, []byte(head+"1 root \"/r\"\n"+`"a" 5 0 0 0 1 0 0 4 - 0 1 0 0`+"\n")),
		fuzztest.New("unsorted", 2, []byte(head+"2 root \"/r\"\n"+`"b" 5 0 0 0 1 0 0 3 - 0 1 0 0`+"\n"+`"a" 5 0 0 0 1 0 0 3 - 0 1 0 0`+"\n")),
		fuzztest.New("count", 2, []byte(head+"2 root \"/r\"\n"+`"a" 5 0 0 0 1 0 0 3 - 0 1 0 0`+"\n")),
		fuzztest.New("unterminated", 2, []byte(head+"1 root \"/r\"\n"+`"a" 5 0 0 0 1 0 0 3 - 0 1 0 0`)),
	}
}

// segmentSeeds are whole log segments: the texts of segmentTexts in
// their objects, a bigger segment, the segments of format v1 an older
// seqkeeper wrote (testdata/v2-store/log), and broken objects.
func segmentSeeds(t testing.TB) []fuzztest.Seed {
	t.Helper()
	var seeds []fuzztest.Seed
	for _, s := range segmentTexts(t) {
		seeds = append(seeds, fuzztest.New(s.Name, gzipObject(logMagic, s.Args[0].(int), string(s.Args[1].([]byte)))))
	}
	sample := mustEncodeSegment(t, sampleSegment())
	seeds = append(seeds,
		fuzztest.New("sample", sample),
		fuzztest.New("trailing", append(slices.Clone(sample), "junk"...)),
		fuzztest.New("truncated", sample[:len(sample)-9]),
		fuzztest.New("bucket-magic", gzipObject(bucketMagic, 2, "segment 7 epoch 3 writer 00000000000000ff records 0 root \"\"\n")),
		fuzztest.New("newer", []byte("seqkeeper-log v3\nwhatever comes next")),
		fuzztest.New("empty", []byte{}),
	)
	for _, pos := range []string{"0000000000000002", "0000000000000003", "0000000000000004"} {
		data, err := os.ReadFile("testdata/v2-store/log/" + pos)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, fuzztest.New("v1-store-"+pos[len(pos)-1:], data))
	}
	return seeds
}

// FuzzDecodeSegment: the log segment decoder never panics and fails only
// with ErrCorrupt or ErrNewerFormat; what it accepts is a segment a writer
// could have written (position from 1, records valid, sorted, unique and
// at or below its epoch), encodes back to the same segment, and, in the
// current format, to the same text byte for byte (only gzip's framing may
// differ).
func FuzzDecodeSegment(f *testing.F) {
	fuzztest.Corpus(f, segmentSeeds(f)...)
	f.Fuzz(checkSegment)
}

// FuzzDecodeSegmentText is FuzzDecodeSegment with the gzip layer done by
// the harness, so that the fuzzer explores the text inside rather than
// gzip's checksums.
func FuzzDecodeSegmentText(f *testing.F) {
	fuzztest.Corpus(f, segmentTexts(f)...)
	f.Fuzz(func(t *testing.T, version int, text []byte) {
		checkSegment(t, gzipObject(logMagic, version, string(text)))
	})
}

// refused reports whether a decoder refused its input, and fails t unless
// its error wraps ErrCorrupt or ErrNewerFormat, the only ways an object is
// refused.
func refused(t *testing.T, err error) bool {
	t.Helper()
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("error %v wraps neither ErrCorrupt nor ErrNewerFormat", err)
	}
	return err != nil
}

// checkSegment holds decodeSegment to the properties of FuzzDecodeSegment.
func checkSegment(t *testing.T, data []byte) {
	sg, err := decodeSegment(data)
	if refused(t, err) {
		return
	}
	if sg.pos < 1 || sg.epoch < 0 {
		t.Fatalf("accepted position %d, epoch %d", sg.pos, sg.epoch)
	}
	for i, r := range sg.recs {
		if err := checkRecord(r); err != nil || r.Name == "" || r.Epoch > sg.epoch || i > 0 && sg.recs[i-1].Name >= r.Name {
			t.Fatalf("accepted record %d %+v of segment epoch %d (%v)", i, r, sg.epoch, err)
		}
	}
	enc := mustEncodeSegment(t, sg)
	again, err := decodeSegment(enc)
	if err != nil {
		t.Fatalf("accepted %+v, but not its encoding: %v", sg, err)
	}
	if !reflect.DeepEqual(again, sg) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", again, sg)
	}
	if first, text := objectText(t, data); string(first) == fmt.Sprintf("%s v%d", logMagic, logVersion) {
		if _, encText := objectText(t, enc); !bytes.Equal(encText, text) {
			t.Fatalf("accepted text that it writes back otherwise:\n got %q\nwant %q", encText, text)
		}
	}
}

// FuzzSegmentKey: listing the log takes a key for a segment only if it is
// the one key of that position.
func FuzzSegmentKey(f *testing.F) {
	fuzztest.Corpus(f,
		fuzztest.New("first", segmentKey(1)),
		fuzztest.New("last", segmentKey(math.MaxInt64)),
		fuzztest.New("zero", segmentKey(0)),
		fuzztest.New("upper", "log/00000000000000AB"),
		fuzztest.New("short", "log/ab"),
		fuzztest.New("bucket", bucketKey(3)),
		fuzztest.New("sign", "log/+000000000000001"),
	)
	f.Fuzz(func(t *testing.T, key string) {
		pos, ok := segmentPos(key)
		if !ok {
			return
		}
		if pos < 1 || segmentKey(pos) != key {
			t.Fatalf("segmentPos(%q) = %d, whose key is %q", key, pos, segmentKey(pos))
		}
		if p, ok := segmentPos(segmentKey(pos)); !ok || p != pos {
			t.Fatalf("segmentPos(segmentKey(%d)) = %d, %v", pos, p, ok)
		}
	})
}
