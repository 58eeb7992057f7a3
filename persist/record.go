// The record line: how one Record is written in a bucket object or a log
// segment (format version 2), and read in versions 1 and 2.

package persist

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

func appendRecord(b []byte, r *Record) []byte {
	b = strconv.AppendQuote(b, r.Name)
	for _, v := range [...]int64{r.Ceiling, r.Czxid, r.Mzxid, int64(r.Version), r.Live, r.Dead, r.Seen, r.Epoch} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	if r.Legacy {
		b = append(b, " L "...)
	} else {
		b = append(b, " - "...)
	}
	b = strconv.AppendInt(b, r.Updated.UnixMilli(), 10)
	for _, v := range [...]int64{r.Start, r.End, int64(r.Windows)} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	return append(b, '\n')
}

// recordFields splits a record line into its name and n fields after it.
func recordFields(line []byte, n int) (string, []string, error) {
	s := string(line)
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", nil, fmt.Errorf("bad name: %v", err)
	}
	// Only as the writers quote it (in every format version): "\x61"
	// would otherwise be read as "a" (FuzzDecodeSegment holds it).
	name, ok := unquote(q)
	if !ok || name == "" {
		return "", nil, fmt.Errorf("bad name %.80s", q)
	}
	// Unquote may return a piece of s: a name kept (the primary keys its
	// map with it) would keep the whole line.
	name = strings.Clone(name)
	rest, ok := strings.CutPrefix(s[len(q):], " ")
	f := make([]string, n)
	for i := range f {
		if !ok {
			return "", nil, fmt.Errorf("%q: want %d fields after the name", name, n)
		}
		f[i], rest, ok = strings.Cut(rest, " ")
	}
	if ok {
		return "", nil, fmt.Errorf("%q: more than %d fields after the name", name, n)
	}
	return name, f, nil
}

// ints parses the canonical decimal fields at idx of f.
func ints(name string, f []string, idx ...int) ([]int64, error) {
	out := make([]int64, len(idx))
	for i, j := range idx {
		v, ok := parseCanonical(f[j])
		if !ok {
			return nil, fmt.Errorf("%q: bad number %.30q", name, f[j])
		}
		out[i] = v
	}
	return out, nil
}

// parseRecord parses a record line of format version 2.
func parseRecord(line []byte) (Record, error) {
	var r Record
	var f []string
	var err error
	if r.Name, f, err = recordFields(line, 13); err != nil {
		return Record{}, err
	}
	v, err := ints(r.Name, f, 0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12)
	if err != nil {
		return Record{}, err
	}
	r.Ceiling, r.Czxid, r.Mzxid = v[0], v[1], v[2]
	if v[3] != int64(int32(v[3])) {
		return Record{}, fmt.Errorf("%q: version %d out of range", r.Name, v[3])
	}
	r.Version = int32(v[3])
	r.Live, r.Dead, r.Seen, r.Epoch = v[4], v[5], v[6], v[7]
	r.Updated = time.UnixMilli(v[8]).UTC()
	r.Start, r.End = v[9], v[10]
	if v[11] != int64(int32(v[11])) || v[11] < 0 {
		return Record{}, fmt.Errorf("%q: windows %d out of range", r.Name, v[11])
	}
	r.Windows = int(v[11])
	switch f[8] {
	case "-":
	case "L":
		r.Legacy = true
	default:
		return Record{}, fmt.Errorf("%q: bad flags %.10q", r.Name, f[8])
	}
	return r, checkRecord(r)
}

// parseRecordV1 parses a record line of format version 1: ceiling, writer
// epoch, creation and modification zxids, znode version, flags (L legacy,
// D deleted), update time, start, end and windows. It has no incarnation:
// a live record reads as live with an unknown birth (Live 1: any
// incarnation born later is newer), and a tombstone as the death of every
// incarnation up to its ceiling (Dead), with its ceiling at least 1, so
// that a sequence created again starts above it (a deleted registration
// with start 1 had ceiling 0: the new one starts at 2).
func parseRecordV1(line []byte) (Record, error) {
	var r Record
	var f []string
	var err error
	if r.Name, f, err = recordFields(line, 10); err != nil {
		return Record{}, err
	}
	v, err := ints(r.Name, f, 0, 1, 2, 3, 4, 6, 7, 8, 9)
	if err != nil {
		return Record{}, err
	}
	r.Ceiling, r.Epoch, r.Czxid, r.Mzxid = v[0], v[1], v[2], v[3]
	if v[4] != int64(int32(v[4])) {
		return Record{}, fmt.Errorf("%q: version %d out of range", r.Name, v[4])
	}
	r.Version = int32(v[4])
	r.Updated = time.UnixMilli(v[5]).UTC()
	r.Start, r.End = v[6], v[7]
	if v[8] != int64(int32(v[8])) || v[8] < 0 {
		return Record{}, fmt.Errorf("%q: windows %d out of range", r.Name, v[8])
	}
	r.Windows = int(v[8])
	deleted := false
	switch f[5] {
	case "-":
	case "L":
		r.Legacy = true
	case "D":
		deleted = true
	case "LD":
		r.Legacy, deleted = true, true
	default:
		return Record{}, fmt.Errorf("%q: bad flags %.10q", r.Name, f[5])
	}
	if err := checkRecord(r); err != nil {
		return Record{}, err
	}
	if deleted {
		r.Ceiling = max(r.Ceiling, 1)
		r.Dead = r.Ceiling
	} else {
		r.Live = 1
	}
	return r, nil
}

// checkRecord refuses what no writer stores: negative numbers, and a
// tombstone above its ceiling (Put raises the ceiling to it).
func checkRecord(r Record) error {
	switch {
	case r.Ceiling < 0:
		return fmt.Errorf("%q: negative ceiling %d", r.Name, r.Ceiling)
	case r.Epoch < 0:
		return fmt.Errorf("%q: negative epoch %d", r.Name, r.Epoch)
	case r.Start < 0 || r.End < 0:
		return fmt.Errorf("%q: negative start or end", r.Name)
	case r.Live < 0 || r.Dead < 0:
		return fmt.Errorf("%q: negative live or dead", r.Name)
	case r.Dead > r.Ceiling:
		return fmt.Errorf("%q: dead %d above the ceiling %d", r.Name, r.Dead, r.Ceiling)
	}
	return nil
}
