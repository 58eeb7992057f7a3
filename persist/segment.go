package persist

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/klauspost/compress/gzip"
)

// A log segment is what one store write adds: one object, created once at
// the next free position of the log and never changed (see log.go). Its
// format follows the bucket object's: the line "seqkeeper-log v1", then a
// gzip stream of text lines:
//
//	segment 42 epoch 7 writer 9f86d081884c7d65 records 2
//	"orders" 5000 7 4294967298 4294967310 3 - 1767225600000 1 0 0
//	"users" 120 7 4294967301 4294967301 0 - 1767225500000 1 0 8
//
// The header gives the segment's position (which must match its key), the
// leader epoch of its writer, the writer's random tag (so a writer whose
// reply was lost recognises its own segment) and the record count. Records
// are the bucket format's, sorted by name, each name once; none has an epoch
// above the segment's. A segment with no records is a seal: a primary's
// claim on the log's tail (Seal).

// segment is one decoded log segment.
type segment struct {
	pos    int64
	epoch  int64
	writer uint64
	recs   []Record
}

// segmentKey is the object key of the log segment at position pos. Sixteen
// hex digits sort in position order.
func segmentKey(pos int64) string { return fmt.Sprintf("log/%016x", pos) }

// encodeSegment serialises sg. Like encodeBucket it does not validate.
func encodeSegment(sg *segment) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s v%d\n", logMagic, logVersion)
	enc := bucketEncoders.Get().(*bucketEncoder)
	defer bucketEncoders.Put(enc)
	zw, w := enc.zw, enc.w
	zw.Reset(&buf)
	w.Reset(zw)
	fmt.Fprintf(w, "segment %d epoch %d writer %016x records %d\n", sg.pos, sg.epoch, sg.writer, len(sg.recs))
	line := make([]byte, 0, 128)
	for i := range sg.recs {
		line = appendRecord(line[:0], &sg.recs[i])
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

// decodeSegment parses and checks a log segment on its own terms (whether
// it is the segment its key names is the caller's check). Every error wraps
// ErrCorrupt or ErrNewerFormat.
func decodeSegment(data []byte) (*segment, error) {
	rest, err := splitHeader(data, logMagic, logVersion)
	if err != nil {
		return nil, err
	}
	src := bytes.NewReader(rest)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return nil, corruptf("compressed body: %v", err)
	}
	zr.Multistream(false)
	body, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return nil, corruptf("compressed body: %v", err)
	}
	if len(body) > maxDecoded {
		return nil, corruptf("decompresses to more than %d bytes", maxDecoded)
	}
	if src.Len() != 0 {
		return nil, corruptf("%d bytes after the gzip stream", src.Len())
	}
	line, body, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return nil, corruptf("no segment header")
	}
	sg := &segment{}
	var writer string
	var count int
	if n, err := fmt.Sscanf(string(line), "segment %d epoch %d writer %s records %d", &sg.pos, &sg.epoch, &writer, &count); err != nil || n != 4 {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.writer, err = strconv.ParseUint(writer, 16, 64); err != nil || len(writer) != 16 ||
		string(line) != fmt.Sprintf("segment %d epoch %d writer %016x records %d", sg.pos, sg.epoch, sg.writer, count) {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.pos < 1 || sg.epoch < 0 || count < 0 || count > len(body)/16+1 {
		return nil, corruptf("bad segment header %.80q", line)
	}
	sg.recs = make([]Record, 0, count)
	for len(body) > 0 {
		line, body, ok = bytes.Cut(body, []byte{'\n'})
		if !ok {
			return nil, corruptf("record %d: unterminated line", len(sg.recs)+1)
		}
		r, err := parseRecord(line)
		if err != nil {
			return nil, corruptf("record %d: %v", len(sg.recs)+1, err)
		}
		if r.Epoch > sg.epoch {
			return nil, corruptf("record %q: epoch %d above the segment's %d", r.Name, r.Epoch, sg.epoch)
		}
		if n := len(sg.recs); n > 0 && sg.recs[n-1].Name >= r.Name {
			return nil, corruptf("record %q: names out of order or repeated", r.Name)
		}
		sg.recs = append(sg.recs, r)
	}
	if len(sg.recs) != count {
		return nil, corruptf("header says %d records, found %d", count, len(sg.recs))
	}
	return sg, nil
}
