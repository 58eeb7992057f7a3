package persist

import (
	"fmt"
	"strconv"
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
	return encodeObject(logMagic, logVersion,
		fmt.Sprintf("segment %d epoch %d writer %016x records %d", sg.pos, sg.epoch, sg.writer, len(sg.recs)), sg.recs)
}

// decodeSegment parses and checks a log segment on its own terms (whether
// it is the segment its key names is the caller's check). Every error wraps
// ErrCorrupt or ErrNewerFormat.
func decodeSegment(data []byte) (*segment, error) {
	line, body, err := openObject(data, logMagic, logVersion, "segment")
	if err != nil {
		return nil, err
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
	if sg.pos < 1 || sg.epoch < 0 || count < 0 {
		return nil, corruptf("bad segment header %.80q", line)
	}
	if sg.recs, err = parseRecords(body, count, sg.epoch, "segment"); err != nil {
		return nil, err
	}
	return sg, nil
}
