package persist

import (
	"bufio"
	"bytes"
	"errors"
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
//	bucket 10 of 256 epoch 7 records 2 root "/all-sequences"
//	"orders" 5000 4294967298 4294967310 3 1 0 30064771072 7 - 1767225600000 1 0 0
//	"users" 120 4294967301 4294967301 0 0 120 0 6 L 1767225500000 1 0 0
//
// The header gives the bucket's index and count, the highest leader epoch of
// its writers, the record count (so a stream cut at a line boundary is still
// caught) and the sequences root the store belongs to. Each record is: the
// name as a Go quoted string (any bytes survive), ceiling, creation zxid,
// modification zxid, znode version, live, dead, seen, writer epoch, flags
// ("-", or L for legacy), the update time in Unix milliseconds, start, end
// and windows (see Record). Records are sorted by name, each name once.
//
// Version 1 of the bucket and log formats (seqkeeper before the lattice
// record) is read too: its record lines have no live, dead and seen
// fields and carry a deleted flag (D); readRecordV1 says how they map.
//
// The meta and epoch objects are plain "key value" lines after the first.
const (
	bucketMagic   = "seqkeeper-bucket"
	bucketVersion = 2 // 2: the lattice record, the root in the header
	metaMagic     = "seqkeeper-store"
	metaVersion   = 2 // 2: the root
	epochMagic    = "seqkeeper-epoch"
	epochVersion  = 3 // 2: the log's checkpoint; 3: none (the log is listed)
	logMagic      = "seqkeeper-log"
	logVersion    = 2 // 2: as the bucket's

	// maxDecoded bounds a decompressed bucket, so a corrupt or hostile
	// object cannot exhaust memory. A bucket of 100,000 long names is a few
	// megabytes.
	maxDecoded = 64 << 20
)

// bucketObject is the decoded content of one bucket object.
type bucketObject struct {
	bucket  int
	buckets int
	epoch   int64 // highest leader epoch of the object's writers
	root    string
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

// Key prefixes: every bucket object and log segment lies under one of them,
// so that listing one finds them all.
const (
	bucketPrefix = "buckets/"
	logPrefix    = "log/"
)

// bucketKey is the object key of bucket b.
func bucketKey(b int) string { return fmt.Sprintf("%s%04x", bucketPrefix, b) }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// encodeBucket serialises o. It does not validate: the decoder is the one
// place that decides what a valid object is (tests rely on writing invalid
// ones through here).
func encodeBucket(o *bucketObject) ([]byte, error) {
	return encodeObject(bucketMagic, bucketVersion,
		fmt.Sprintf("bucket %d of %d epoch %d records %d root %s", o.bucket, o.buckets, o.epoch, len(o.recs), strconv.Quote(o.root)), o.recs)
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
	size := len(header) + 1
	for i := range recs {
		line = appendRecord(line[:0], &recs[i])
		if size += len(line); size > maxDecoded {
			// Every reader would refuse it as corrupt: never write it.
			return nil, fmt.Errorf("%s object of %d records: more than the %d bytes a reader decompresses", magic, len(recs), maxDecoded)
		}
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
// gzip writer holds about 1 MB of compressor state, and a write that
// touches every bucket encodes 256 objects; pooled, they do not each
// allocate (and zero) their own.
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

// splitHeader checks an object's first line ("<magic> v<N>") and returns the
// version and the rest of the object.
func splitHeader(data []byte, magic string, current int) (version int, rest []byte, err error) {
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	if !ok || len(line) > 64 {
		return 0, nil, corruptf("no %s header line", magic)
	}
	m, v, ok := strings.Cut(string(line), " v")
	if !ok || m != magic {
		return 0, nil, corruptf("not a %s object (first line %.40q)", magic, line)
	}
	ver, err := strconv.Atoi(v)
	switch {
	case err != nil || ver < 1:
		return 0, nil, corruptf("bad %s format version %.20q", magic, v)
	case ver > current:
		return 0, nil, &NewerFormatError{Format: magic, Version: ver, Reads: current}
	}
	return ver, rest, nil
}

// decodeBucket parses and checks a bucket object on its own terms (whether
// it is the bucket its key names, and of this store's root, is the
// caller's check). Every error wraps ErrCorrupt or ErrNewerFormat.
func decodeBucket(data []byte) (*bucketObject, error) {
	version, line, body, err := openObject(data, bucketMagic, bucketVersion, "bucket")
	if err != nil {
		return nil, err
	}
	o := &bucketObject{}
	head, root, err := cutRoot(string(line), version)
	if err != nil {
		return nil, corruptf("bad bucket header %.80q: %v", line, err)
	}
	o.root = root
	var count int
	if n, err := fmt.Sscanf(head, "bucket %d of %d epoch %d records %d", &o.bucket, &o.buckets, &o.epoch, &count); err != nil || n != 4 ||
		head != fmt.Sprintf("bucket %d of %d epoch %d records %d", o.bucket, o.buckets, o.epoch, count) {
		return nil, corruptf("bad bucket header %.80q", line)
	}
	if o.buckets < 1 || o.buckets > MaxBuckets || o.bucket < 0 || o.bucket >= o.buckets || o.epoch < 0 || count < 0 {
		return nil, corruptf("bad bucket header %.80q", line)
	}
	if o.recs, err = parseRecords(body, count, o.epoch, "bucket", version); err != nil {
		return nil, err
	}
	return o, nil
}

// cutRoot splits the root off an object header line of format version
// (" root <quoted>" at its end from version 2 on; "" before).
func cutRoot(line string, version int) (head, root string, err error) {
	if version < 2 {
		return line, "", nil
	}
	head, q, ok := strings.Cut(line, " root ")
	if !ok {
		return "", "", errors.New("no root")
	}
	if root, ok = unquote(q); !ok {
		return "", "", fmt.Errorf("bad root %.40s", q)
	}
	return head, root, nil
}

// unquote reads a string as the writers quote it (strconv.Quote) and
// refuses any other spelling of it: "\x2f" for "/" would be read as a
// value the object does not spell, and written back otherwise.
func unquote(q string) (string, bool) {
	s, err := strconv.Unquote(q)
	return s, err == nil && strconv.Quote(s) == q
}

// openObject checks the header line of an object of the bucket layout,
// decompresses the rest (bounded by maxDecoded) and returns the format
// version, the first line of the decompressed text (the object's own
// header, which the caller parses) and the record lines after it.
func openObject(data []byte, magic string, current int, kind string) (version int, header, body []byte, err error) {
	version, rest, err := splitHeader(data, magic, current)
	if err != nil {
		return 0, nil, nil, err
	}
	src := bytes.NewReader(rest)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return 0, nil, nil, corruptf("compressed body: %v", err)
	}
	zr.Multistream(false)
	text, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return 0, nil, nil, corruptf("compressed body: %v", err)
	}
	if len(text) > maxDecoded {
		return 0, nil, nil, corruptf("decompresses to more than %d bytes", maxDecoded)
	}
	if src.Len() != 0 {
		return 0, nil, nil, corruptf("%d bytes after the gzip stream", src.Len())
	}
	header, body, ok := bytes.Cut(text, []byte{'\n'})
	if !ok {
		return 0, nil, nil, corruptf("no %s header", kind)
	}
	return version, header, body, nil
}

// parseRecords parses the record lines (of format version) of an object
// whose header claims count records written at epoch or below: sorted by
// name, each name once.
func parseRecords(body []byte, count int, epoch int64, kind string, version int) ([]Record, error) {
	if count > len(body)/16+1 { // a record line is at least 16 bytes
		return nil, corruptf("header claims %d records in %d bytes", count, len(body))
	}
	parse := parseRecord
	if version < 2 {
		parse = parseRecordV1
	}
	recs := make([]Record, 0, count)
	for len(body) > 0 {
		line, rest, ok := bytes.Cut(body, []byte{'\n'})
		if !ok {
			return nil, corruptf("record %d: unterminated line", len(recs)+1)
		}
		body = rest
		r, err := parse(line)
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

// checkBucket verifies that o is bucket b of n of root: a record filed
// under the wrong bucket would be invisible to Get and could be shadowed by
// a write to the right one, and a bucket of another root's store would mix
// two roots' records.
func checkBucket(o *bucketObject, b, n int, root string) error {
	if o.bucket != b || o.buckets != n {
		return corruptf("holds bucket %d of %d, expected %d of %d", o.bucket, o.buckets, b, n)
	}
	if err := checkRoot(o.root, root); err != nil {
		return err
	}
	for i := range o.recs {
		if got := bucketOf(o.recs[i].Name, n); got != b {
			return corruptf("record %q belongs in bucket %d", o.recs[i].Name, got)
		}
	}
	return nil
}

// checkRoot refuses an object written for another root than want. An
// object of a format without a root ("") and a store that does not check
// (want "") pass.
func checkRoot(got, want string) error {
	if got != "" && want != "" && got != want {
		return fmt.Errorf("%w: it belongs to the sequences root %q, and this seqkeeper serves %q: give every root a store of its own (its own bucket prefix or directory)", ErrOtherRoot, got, want)
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

// decodeFields parses what encodeFields wrote and returns the format
// version. Every key in want must be present exactly once, and keys in
// may at most once, in that order (the writers' order: an object in
// another was not written by one); other keys are refused (a same-version
// writer never writes them).
func decodeFields(data []byte, magic string, current int, want, may []string) (int, map[string]string, error) {
	version, rest, err := splitHeader(data, magic, current)
	if err != nil {
		return 0, nil, err
	}
	order := append(slices.Clip(want), may...)
	fields := make(map[string]string, len(want))
	last := -1 // the index in order of the last key read
	for len(rest) > 0 {
		line, r, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return 0, nil, corruptf("unterminated line %.40q", line)
		}
		rest = r
		k, v, ok := strings.Cut(string(line), " ")
		i := slices.Index(order, k)
		if !ok || i < 0 {
			return 0, nil, corruptf("unexpected line %.40q", line)
		}
		if _, dup := fields[k]; dup {
			return 0, nil, corruptf("%s given twice", k)
		}
		if i < last {
			return 0, nil, corruptf("%s after %s: the lines are out of order", k, order[last])
		}
		last = i
		fields[k] = v
	}
	for _, k := range want {
		if _, ok := fields[k]; !ok {
			return 0, nil, corruptf("no %s line", k)
		}
	}
	return version, fields, nil
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

// metaState is the content of the meta object: the bucket count, fixed
// when the store is created, and the root the store belongs to ("" in a
// version 1 object, written before the root was recorded).
type metaState struct {
	buckets int
	root    string
	version int
}

func encodeMeta(m metaState) []byte {
	return encodeFields(metaMagic, metaVersion, "buckets", strconv.Itoa(m.buckets), "root", strconv.Quote(m.root))
}

func decodeMeta(data []byte) (metaState, error) {
	version, f, err := decodeFields(data, metaMagic, metaVersion, []string{"buckets"}, []string{"root"})
	if err != nil {
		return metaState{}, err
	}
	n, err := parseCount(f["buckets"])
	if err != nil || n < 1 || n > MaxBuckets {
		return metaState{}, corruptf("bad bucket count %.30q", f["buckets"])
	}
	m := metaState{buckets: int(n), version: version}
	if q, ok := f["root"]; ok {
		if m.root, ok = unquote(q); !ok || version < 2 {
			return metaState{}, corruptf("bad root %.40q", q)
		}
	} else if version >= 2 {
		return metaState{}, corruptf("no root line")
	}
	return m, nil
}

// epochState is the content of the epoch object. Version 2 also held the
// log's checkpoint, which version 3 dropped (the log is found by listing
// it); a version 2 object is read with its checkpoint ignored.
type epochState struct {
	epoch   int64
	holder  string
	updated time.Time
	// version is the format the object was read in (encodeEpoch always
	// writes epochVersion).
	version int
}

func encodeEpoch(e epochState) []byte {
	return encodeFields(epochMagic, epochVersion,
		"epoch", strconv.FormatInt(e.epoch, 10),
		"holder", strconv.Quote(e.holder),
		"updated", strconv.FormatInt(e.updated.UnixMilli(), 10))
}

func decodeEpoch(data []byte) (epochState, error) {
	version, f, err := decodeFields(data, epochMagic, epochVersion, []string{"epoch", "holder", "updated"}, []string{"checkpoint", "swept"})
	if err != nil {
		return epochState{}, err
	}
	_, ck := f["checkpoint"]
	_, sw := f["swept"]
	if (ck || sw) != (version == 2) || ck != sw {
		return epochState{}, corruptf("checkpoint and swept belong to format v2 (and only there)")
	}
	e := epochState{version: version}
	if e.epoch, err = parseCount(f["epoch"]); err != nil {
		return epochState{}, corruptf("epoch: %v", err)
	}
	var ok bool
	if e.holder, ok = unquote(f["holder"]); !ok {
		return epochState{}, corruptf("bad holder %.40q", f["holder"])
	}
	// Canonical, as every number of the formats: "+5" or "05" is not what
	// a writer writes (FuzzDecodeEpoch holds it).
	ms, ok := parseCanonical(f["updated"])
	if !ok {
		return epochState{}, corruptf("bad update time %.30q", f["updated"])
	}
	e.updated = time.UnixMilli(ms).UTC()
	if version == 2 {
		for _, k := range []string{"checkpoint", "swept"} {
			if _, err := parseCount(f[k]); err != nil {
				return epochState{}, corruptf("%s: %v", k, err)
			}
		}
	}
	return e, nil
}

// maxObject bounds what a backend reads into memory for one object. The
// store never writes one that large, so a larger object is corruption.
const maxObject = 64 << 20
