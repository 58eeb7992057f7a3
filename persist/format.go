package persist

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Object formats. Each object starts with one plain-text line, "<magic>
// v<version>", so a newer format is recognised (and refused with
// ErrNewerFormat) before anything else is parsed.
//
// A bucket object continues with a gzip stream (whose CRC covers everything
// after the first line) holding text lines:
//
//	bucket 10 of 256 epoch 7 records 2
//	"orders" 5000 7 4294967298 4294967310 3 - 1767225600000
//	"users" 120 6 4294967301 4294967301 0 LD 1767225500000
//
// The header gives the bucket's index and count, the highest leader epoch of
// its writers and the record count (so a stream cut at a line boundary is
// still caught). Each record is: the name as a Go quoted string (any bytes
// survive), ceiling, writer epoch, creation zxid, modification zxid, znode
// version, flags ("-", or L for legacy and D for deleted) and the update time
// in Unix milliseconds. Records are sorted by name, each name once.
//
// The meta and epoch objects are plain "key value" lines after the first.
const (
	bucketMagic   = "seqkeeper-bucket"
	bucketVersion = 1
	metaMagic     = "seqkeeper-store"
	metaVersion   = 1
	epochMagic    = "seqkeeper-epoch"
	epochVersion  = 2 // 2: the log layout (checkpoint and swept)
	logMagic      = "seqkeeper-log"
	logVersion    = 1

	// maxDecoded bounds a decompressed bucket, so a corrupt or hostile
	// object cannot exhaust memory. A bucket of 100,000 long names is a few
	// megabytes.
	maxDecoded = 64 << 20
)

// bucketObject is the decoded content of one bucket object.
type bucketObject struct {
	bucket  int
	buckets int
	epoch   int64    // highest leader epoch of the object's writers
	recs    []Record // sorted by name, names unique
}

// bucketOf is the bucket a name belongs to: fnv-1a (32 bit) modulo n. It is
// part of the format: changing it moves every record.
func bucketOf(name string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// bucketKey is the object key of bucket b.
func bucketKey(b int) string { return fmt.Sprintf("buckets/%04x", b) }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// encodeBucket serialises o. It does not validate: the decoder is the one
// place that decides what a valid object is (tests rely on writing invalid
// ones through here).
func encodeBucket(o *bucketObject) ([]byte, error) {
	return encodeObject(bucketMagic, bucketVersion,
		fmt.Sprintf("bucket %d of %d epoch %d records %d", o.bucket, o.buckets, o.epoch, len(o.recs)), o.recs)
}

// encodeObject serialises an object of the bucket layout (buckets and log
// segments): the line "<magic> v<version>", then a gzip stream of the
// header line and one line per record.
func encodeObject(magic string, version int, header string, recs []Record) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s v%d\n", magic, version)
	enc := bucketEncoders.Get().(*bucketEncoder)
	defer bucketEncoders.Put(enc)
	zw, w := enc.zw, enc.w
	zw.Reset(&buf)
	w.Reset(zw)
	fmt.Fprintf(w, "%s\n", header)
	line := make([]byte, 0, 128)
	for i := range recs {
		line = appendRecord(line[:0], &recs[i])
		if _, err := w.Write(line); err != nil {
			return nil, err
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// bucketEncoder is the reusable state of encodeBucket. Performance: a
// gzip writer holds about 1 MB of compressor state, and a store write
// that touches every bucket encoded 256 objects, each allocating (and
// zeroing) its own; pooling them removes that from every raise.
type bucketEncoder struct {
	zw *gzip.Writer
	w  *bufio.Writer
}

var bucketEncoders = sync.Pool{New: func() any {
	zw, err := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return &bucketEncoder{zw: zw, w: bufio.NewWriterSize(zw, 32<<10)}
}}

func appendRecord(b []byte, r *Record) []byte {
	b = strconv.AppendQuote(b, r.Name)
	for _, v := range [...]int64{r.Ceiling, r.Epoch, r.Czxid, r.Mzxid, int64(r.Version)} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, ' ')
	switch {
	case r.Legacy && r.Deleted:
		b = append(b, "LD"...)
	case r.Legacy:
		b = append(b, 'L')
	case r.Deleted:
		b = append(b, 'D')
	default:
		b = append(b, '-')
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Updated.UnixMilli(), 10)
	for _, v := range [...]int64{r.Start, r.End, int64(r.Windows)} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	return append(b, '\n')
}

// splitHeader checks an object's first line ("<magic> v<N>") and returns the
// version and the rest of the object.
func splitHeader(data []byte, magic string, current int) (rest []byte, err error) {
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	if !ok || len(line) > 64 {
		return nil, corruptf("no %s header line", magic)
	}
	m, v, ok := strings.Cut(string(line), " v")
	if !ok || m != magic {
		return nil, corruptf("not a %s object (first line %.40q)", magic, line)
	}
	ver, err := strconv.Atoi(v)
	switch {
	case err != nil || ver < 1:
		return nil, corruptf("bad %s format version %.20q", magic, v)
	case ver > current:
		return nil, fmt.Errorf("%w (object format %s v%d, this build reads up to v%d)", ErrNewerFormat, magic, ver, current)
	}
	return rest, nil
}

// objectVersion returns the format version of an object's header line
// ("<magic> v<N>"), refusing what splitHeader refuses.
func objectVersion(data []byte, magic string, current int) (int, error) {
	if _, err := splitHeader(data, magic, current); err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	_, v, _ := strings.Cut(string(line), " v")
	return strconv.Atoi(v)
}

// decodeBucket parses and checks a bucket object on its own terms (whether
// it is the bucket its key names is the caller's check). Every error wraps
// ErrCorrupt or ErrNewerFormat.
func decodeBucket(data []byte) (*bucketObject, error) {
	line, body, err := openObject(data, bucketMagic, bucketVersion, "bucket")
	if err != nil {
		return nil, err
	}
	o := &bucketObject{}
	var count int
	if n, err := fmt.Sscanf(string(line), "bucket %d of %d epoch %d records %d", &o.bucket, &o.buckets, &o.epoch, &count); err != nil || n != 4 ||
		string(line) != fmt.Sprintf("bucket %d of %d epoch %d records %d", o.bucket, o.buckets, o.epoch, count) {
		return nil, corruptf("bad bucket header %.80q", line)
	}
	if o.buckets < 1 || o.buckets > MaxBuckets || o.bucket < 0 || o.bucket >= o.buckets || o.epoch < 0 || count < 0 {
		return nil, corruptf("bad bucket header %.80q", line)
	}
	if o.recs, err = parseRecords(body, count, o.epoch, "bucket"); err != nil {
		return nil, err
	}
	return o, nil
}

// openObject checks the header line of an object of the bucket layout,
// decompresses the rest (bounded by maxDecoded) and returns the first line
// of the decompressed text (the object's own header, which the caller
// parses) and the record lines after it.
func openObject(data []byte, magic string, version int, kind string) (header, body []byte, err error) {
	rest, err := splitHeader(data, magic, version)
	if err != nil {
		return nil, nil, err
	}
	src := bytes.NewReader(rest)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return nil, nil, corruptf("compressed body: %v", err)
	}
	zr.Multistream(false)
	text, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return nil, nil, corruptf("compressed body: %v", err)
	}
	if len(text) > maxDecoded {
		return nil, nil, corruptf("decompresses to more than %d bytes", maxDecoded)
	}
	if src.Len() != 0 {
		return nil, nil, corruptf("%d bytes after the gzip stream", src.Len())
	}
	header, body, ok := bytes.Cut(text, []byte{'\n'})
	if !ok {
		return nil, nil, corruptf("no %s header", kind)
	}
	return header, body, nil
}

// parseRecords parses the record lines of an object whose header claims
// count records written at epoch or below: sorted by name, each name once.
func parseRecords(body []byte, count int, epoch int64, kind string) ([]Record, error) {
	if count > len(body)/16+1 { // a record line is at least 16 bytes
		return nil, corruptf("header claims %d records in %d bytes", count, len(body))
	}
	recs := make([]Record, 0, count)
	for len(body) > 0 {
		line, rest, ok := bytes.Cut(body, []byte{'\n'})
		if !ok {
			return nil, corruptf("record %d: unterminated line", len(recs)+1)
		}
		body = rest
		r, err := parseRecord(line)
		if err != nil {
			return nil, corruptf("record %d: %v", len(recs)+1, err)
		}
		if r.Epoch > epoch {
			return nil, corruptf("record %q: epoch %d above the %s's %d", r.Name, r.Epoch, kind, epoch)
		}
		if n := len(recs); n > 0 && recs[n-1].Name >= r.Name {
			return nil, corruptf("record %q: names out of order or repeated", r.Name)
		}
		recs = append(recs, r)
	}
	if len(recs) != count {
		return nil, corruptf("header says %d records, found %d", count, len(recs))
	}
	return recs, nil
}

func parseRecord(line []byte) (Record, error) {
	s := string(line)
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return Record{}, fmt.Errorf("bad name: %v", err)
	}
	var r Record
	if r.Name, err = strconv.Unquote(q); err != nil || r.Name == "" {
		return Record{}, fmt.Errorf("bad name %.80s", q)
	}
	// Unquote may return a piece of s: a name kept (the primary keys its
	// map with it) would keep the whole line.
	r.Name = strings.Clone(r.Name)
	rest, ok := strings.CutPrefix(s[len(q):], " ")
	var f [10]string
	for i := range f {
		if !ok {
			return Record{}, fmt.Errorf("%q: want %d fields after the name", r.Name, len(f))
		}
		f[i], rest, ok = strings.Cut(rest, " ")
	}
	if ok {
		return Record{}, fmt.Errorf("%q: more than %d fields after the name", r.Name, len(f))
	}
	var ints [9]int64
	for i, idx := range [...]int{0, 1, 2, 3, 4, 6, 7, 8, 9} {
		v, ok := parseCanonical(f[idx])
		if !ok {
			return Record{}, fmt.Errorf("%q: bad number %.30q", r.Name, f[idx])
		}
		ints[i] = v
	}
	r.Ceiling, r.Epoch, r.Czxid, r.Mzxid = ints[0], ints[1], ints[2], ints[3]
	if ints[4] != int64(int32(ints[4])) {
		return Record{}, fmt.Errorf("%q: version %d out of range", r.Name, ints[4])
	}
	r.Version = int32(ints[4])
	r.Updated = time.UnixMilli(ints[5]).UTC()
	r.Start, r.End = ints[6], ints[7]
	if ints[8] != int64(int32(ints[8])) || ints[8] < 0 {
		return Record{}, fmt.Errorf("%q: windows %d out of range", r.Name, ints[8])
	}
	r.Windows = int(ints[8])
	switch f[5] {
	case "-":
	case "L":
		r.Legacy = true
	case "D":
		r.Deleted = true
	case "LD":
		r.Legacy, r.Deleted = true, true
	default:
		return Record{}, fmt.Errorf("%q: bad flags %.10q", r.Name, f[5])
	}
	if r.Ceiling < 0 {
		return Record{}, fmt.Errorf("%q: negative ceiling %d", r.Name, r.Ceiling)
	}
	if r.Epoch < 0 {
		return Record{}, fmt.Errorf("%q: negative epoch %d", r.Name, r.Epoch)
	}
	if r.Start < 0 || r.End < 0 {
		return Record{}, fmt.Errorf("%q: negative start or end", r.Name)
	}
	return r, nil
}

// checkBucket verifies that o is bucket b of n: a record filed under the
// wrong bucket would be invisible to Get and could be shadowed by a write to
// the right one.
func checkBucket(o *bucketObject, b, n int) error {
	if o.bucket != b || o.buckets != n {
		return corruptf("holds bucket %d of %d, expected %d of %d", o.bucket, o.buckets, b, n)
	}
	for i := range o.recs {
		if got := bucketOf(o.recs[i].Name, n); got != b {
			return corruptf("record %q belongs in bucket %d", o.recs[i].Name, got)
		}
	}
	return nil
}

// encodeFields writes a small object: the header line, then "key value"
// lines in the order given.
func encodeFields(magic string, version int, kv ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s v%d\n", magic, version)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s %s\n", kv[i], kv[i+1])
	}
	return b.Bytes()
}

// decodeFields parses what encodeFields wrote. Every key in want must be
// present exactly once; other keys are refused (a same-version writer never
// writes them).
func decodeFields(data []byte, magic string, version int, want ...string) (map[string]string, error) {
	rest, err := splitHeader(data, magic, version)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string, len(want))
	for len(rest) > 0 {
		line, r, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return nil, corruptf("unterminated line %.40q", line)
		}
		rest = r
		k, v, ok := strings.Cut(string(line), " ")
		if !ok || !slices.Contains(want, k) {
			return nil, corruptf("unexpected line %.40q", line)
		}
		if _, dup := fields[k]; dup {
			return nil, corruptf("%s given twice", k)
		}
		fields[k] = v
	}
	for _, k := range want {
		if _, ok := fields[k]; !ok {
			return nil, corruptf("no %s line", k)
		}
	}
	return fields, nil
}

// parseCanonical parses a decimal int64 in the one form the encoder writes
// (no '+', no leading zeros, no "-0"): accepting others would break the
// round trip that the fuzz tests hold the format to.
func parseCanonical(s string) (int64, bool) {
	d := strings.TrimPrefix(s, "-")
	if d == "" || d[0] == '+' || d[0] == '-' || (d[0] == '0' && len(s) != 1) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// parseCount parses a canonical non-negative decimal.
func parseCount(s string) (int64, error) {
	v, ok := parseCanonical(s)
	if !ok || v < 0 {
		return 0, fmt.Errorf("bad number %.30q", s)
	}
	return v, nil
}

func encodeMeta(buckets int) []byte {
	return encodeFields(metaMagic, metaVersion, "buckets", strconv.Itoa(buckets))
}

func decodeMeta(data []byte) (buckets int, err error) {
	f, err := decodeFields(data, metaMagic, metaVersion, "buckets")
	if err != nil {
		return 0, err
	}
	n, err := parseCount(f["buckets"])
	if err != nil || n < 1 || n > MaxBuckets {
		return 0, corruptf("bad bucket count %.30q", f["buckets"])
	}
	return int(n), nil
}

// epochState is the content of the epoch object. Version 2 adds the log's
// checkpoint and sweep marks (see log.go); a version 1 object is a store of
// the bucket layout, whose log is empty (both marks 0).
type epochState struct {
	epoch   int64
	holder  string
	updated time.Time
	// version is the format the object was read in (encodeEpoch always
	// writes epochVersion).
	version int
	// checkpoint: every log segment at or below it is folded into the
	// bucket objects. swept: every segment at or below it is deleted.
	checkpoint int64
	swept      int64
}

func encodeEpoch(e epochState) []byte {
	return encodeFields(epochMagic, epochVersion,
		"epoch", strconv.FormatInt(e.epoch, 10),
		"holder", strconv.Quote(e.holder),
		"updated", strconv.FormatInt(e.updated.UnixMilli(), 10),
		"checkpoint", strconv.FormatInt(e.checkpoint, 10),
		"swept", strconv.FormatInt(e.swept, 10))
}

func decodeEpoch(data []byte) (epochState, error) {
	version, err := objectVersion(data, epochMagic, epochVersion)
	if err != nil {
		return epochState{}, err
	}
	want := []string{"epoch", "holder", "updated"}
	if version >= 2 {
		want = append(want, "checkpoint", "swept")
	}
	f, err := decodeFields(data, epochMagic, epochVersion, want...)
	if err != nil {
		return epochState{}, err
	}
	e := epochState{version: version}
	if e.epoch, err = parseCount(f["epoch"]); err != nil {
		return epochState{}, corruptf("epoch: %v", err)
	}
	if e.holder, err = strconv.Unquote(f["holder"]); err != nil {
		return epochState{}, corruptf("bad holder %.40q", f["holder"])
	}
	ms, err := strconv.ParseInt(f["updated"], 10, 64)
	if err != nil {
		return epochState{}, corruptf("bad update time %.30q", f["updated"])
	}
	e.updated = time.UnixMilli(ms).UTC()
	if version >= 2 {
		if e.checkpoint, err = parseCount(f["checkpoint"]); err != nil {
			return epochState{}, corruptf("checkpoint: %v", err)
		}
		if e.swept, err = parseCount(f["swept"]); err != nil {
			return epochState{}, corruptf("swept: %v", err)
		}
		if e.swept > e.checkpoint {
			return epochState{}, corruptf("swept %d above checkpoint %d", e.swept, e.checkpoint)
		}
	}
	return e, nil
}

// maxObject bounds what a backend reads into memory for one object. The
// store never writes one that large, so a larger object is corruption.
const maxObject = 64 << 20
