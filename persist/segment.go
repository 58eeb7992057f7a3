package persist

import (
	"fmt"
	"strconv"
	"strings"
)

// A log segment is what one store write adds: one object, created once at
// a free position of the log and never changed (see log.go). Its format
// follows the bucket object's: the line "seqkeeper-log v2", then a gzip
// stream of text lines:
//
//	segment 42 epoch 7 writer 9f86d081884c7d65 records 2 root "/all-sequences"
//	"orders" 5000 4294967298 4294967310 3 0 0 30064771072 7 - 1767225600000 1 0 0
//	"users" 120 4294967301 4294967301 0 1 0 30064771072 7 - 1767225500000 1 0 8
//
// The header gives the segment's position (which must match its key), the
// leader epoch of its writer, the writer's random tag (so a writer whose
// reply was lost recognises its own segment), the record count and the
// sequences root of the store. Records are the bucket format's, sorted by
// name, each name once; none has an epoch above the segment's. A segment
// with no records is a seal: a primary's claim on the log's tail (Seal).

// segment is one decoded log segment.
type segment struct {
	pos    int64
	epoch  int64
	writer uint64
	root   string
	recs   []Record
}

// segmentKey is the object key of the log segment at position pos. Sixteen
// hex digits sort in position order.
func segmentKey(pos int64) string { return fmt.Sprintf("%s%016x", logPrefix, pos) }

// segmentPos is the position of a segment's key, or false for a key that
// is not one (listing the log skips it).
func segmentPos(key string) (int64, bool) {
	hex, ok := strings.CutPrefix(key, logPrefix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	pos, err := strconv.ParseUint(hex, 16, 63)
	if err != nil || pos < 1 || segmentKey(int64(pos)) != key {
		return 0, false
	}
	return int64(pos), true
}

// encodeSegment serialises sg. Like encodeBucket it does not validate.
func encodeSegment(sg *segment) ([]byte, error) {
	return encodeObject(logMagic, logVersion,
		fmt.Sprintf("segment %d epoch %d writer %016x records %d root %s", sg.pos, sg.epoch, sg.writer, len(sg.recs), strconv.Quote(sg.root)), sg.recs)
}

// decodeSegment parses and checks a log segment on its own terms (whether
// it is the segment its key names, and of this store's root, is the
// caller's check). Every error wraps ErrCorrupt or ErrNewerFormat.
func decodeSegment(data []byte) (*segment, error) {
	version, line, body, err := openObject(data, logMagic, logVersion, "segment")
	if err != nil {
		return nil, err
	}
	head, root, err := cutRoot(string(line), version)
	if err != nil {
		return nil, corruptf("bad segment header %.80q: %v", line, err)
	}
	sg := &segment{root: root}
	var writer string
	var count int
	if n, err := fmt.Sscanf(head, "segment %d epoch %d writer %s records %d", &sg.pos, &sg.epoch, &writer, &count); err != nil || n != 4 {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.writer, err = strconv.ParseUint(writer, 16, 64); err != nil || len(writer) != 16 ||
		head != fmt.Sprintf("segment %d epoch %d writer %016x records %d", sg.pos, sg.epoch, sg.writer, count) {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.pos < 1 || sg.epoch < 0 || count < 0 {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.recs, err = parseRecords(body, count, sg.epoch, "segment", version); err != nil {
		return nil, err
	}
	return sg, nil
}
