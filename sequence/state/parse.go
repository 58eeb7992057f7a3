package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ParseState decodes the data of the sequence znode for sequence name. Every
// error wraps ErrCorrupt and names the sequence and, for text, the line.
//
// The forms, tried in this order:
//
//   - exactly 8 bytes starting with a control byte (< 0x20) or a byte >=
//     0x80: a legacy big-endian counter; a negative counter is corrupt. An
//     8-byte text such as "\t1234567" is therefore read as a counter; write
//     registrations without leading control characters;
//   - empty data (or only whitespace): a registration with the defaults
//     (Start DefaultStart, End MaxID);
//   - a bare decimal integer, optionally surrounded by whitespace: a
//     registration starting at that ID;
//   - "key value" lines, keys lowercase, separated by "\n" (a trailing
//     newline and a "\r" ending a line are accepted), optionally preceded by
//     the header line "seqkeeper-sequence v1". Without a next key it is a
//     registration and may set only start, end and windows. With next it is
//     a full state: the header and the keys start, next, ceiling and end are
//     required; windows, recycled, leaked, zkepoch, marker and pushed are
//     optional. pushed lists idempotency keys separated by single spaces.
//
// The decoded state must pass Validate.
func ParseState(name string, data []byte) (State, error) {
	if len(data) == 8 && (data[0] < 0x20 || data[0] >= 0x80) {
		return parseLegacy(name, data)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return State{Name: name, Registered: true, Start: DefaultStart, End: MaxID}, nil
	}
	p := stateParser{name: name, lines: map[string]int{}}
	s, err := p.parse(data)
	if err != nil {
		return State{}, err
	}
	if key, msg := s.problem(); msg != "" {
		return State{}, p.errorf(p.lines[key], "%s", msg)
	}
	return s, nil
}

func parseLegacy(name string, data []byte) (State, error) {
	counter := int64(binary.BigEndian.Uint64(data))
	if counter < 0 {
		return State{}, fmt.Errorf("sequence %q: %w: legacy 8-byte counter is negative (%d); set it to the highest ID issued", name, ErrCorrupt, counter)
	}
	return State{
		Name:    name,
		Legacy:  true,
		Start:   DefaultStart,
		Next:    counter,
		Ceiling: MaxLegacyCounter,
		End:     MaxLegacyCounter,
	}, nil
}

// stateKeys lists the known keys in the order Encode writes them; ParseState
// accepts any order.
var stateKeys = []string{"start", "next", "ceiling", "end", "windows", "recycled", "leaked", "zkepoch", "marker", "pushfloor", "pushed"}

// stateParser decodes the text forms, remembering the line of each key so that
// errors found after parsing still point at a line.
type stateParser struct {
	name  string
	lines map[string]int // key -> 1-based line number
}

func (p *stateParser) errorf(line int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		return fmt.Errorf("sequence %q: %w: line %d: %s", p.name, ErrCorrupt, line, msg)
	}
	return fmt.Errorf("sequence %q: %w: %s", p.name, ErrCorrupt, msg)
}

func (p *stateParser) parse(data []byte) (State, error) {
	if !utf8.Valid(data) {
		return State{}, p.errorf(0, "not UTF-8 text and not an 8-byte legacy counter")
	}
	text := string(data)
	if bare := strings.TrimSpace(text); !strings.ContainsAny(bare, " \t\r\n") && strings.ContainsAny(bare[:1], "+-0123456789") {
		start, err := parseNumber(bare)
		if err != nil {
			return State{}, p.errorf(1, "registration start: %v", err)
		}
		p.lines["start"] = 1
		return State{Name: p.name, Registered: true, Start: start, End: MaxID}, nil
	}

	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	values := map[string]string{}
	hasHeader := false
	for i, line := range lines {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return State{}, p.errorf(n, "empty line")
		}
		if rest, ok := strings.CutPrefix(line, formatName); ok {
			if err := p.checkHeader(n, line, rest); err != nil {
				return State{}, err
			}
			hasHeader = true
			continue
		}
		key, value, ok := strings.Cut(line, " ")
		if !slices.Contains(stateKeys, key) {
			return State{}, p.errorf(n, "unknown key %q (this seqkeeper knows: %s)", key, strings.Join(stateKeys, ", "))
		}
		if !ok && key != "recycled" && key != "pushed" {
			return State{}, p.errorf(n, "key %s has no value (want %q)", key, key+" <number>")
		}
		if first, dup := p.lines[key]; dup {
			return State{}, p.errorf(n, "duplicate key %s (first on line %d)", key, first)
		}
		p.lines[key] = n
		values[key] = value
	}

	s := State{Name: p.name}
	if _, full := values["next"]; !full {
		for _, key := range []string{"ceiling", "recycled", "leaked", "zkepoch", "marker", "pushfloor", "pushed"} {
			if n, ok := p.lines[key]; ok {
				return State{}, p.errorf(n, "key %s without next: a registration (no next) may set only start, end and windows", key)
			}
		}
		s.Registered, s.Start, s.End = true, DefaultStart, MaxID
	} else {
		if !hasHeader {
			return State{}, p.errorf(1, "a full state (one with next) must begin with the line %q", formatHeader)
		}
		for _, key := range []string{"start", "ceiling", "end"} {
			if _, ok := values[key]; !ok {
				return State{}, p.errorf(0, "missing key %s (a full state needs start, next, ceiling and end)", key)
			}
		}
	}
	for _, key := range stateKeys { // a fixed order keeps errors reproducible
		if value, ok := values[key]; ok {
			if err := p.setField(&s, key, value); err != nil {
				return State{}, err
			}
		}
	}
	return s, nil
}

// checkHeader accepts the v1 header on line 1 and explains anything else:
// above all a newer version, which this seqkeeper must not try to read.
func (p *stateParser) checkHeader(n int, line, rest string) error {
	if line == formatHeader {
		if n != 1 {
			return p.errorf(n, "header %q must be the first line", formatHeader)
		}
		return nil
	}
	v, ok := strings.CutPrefix(rest, " v")
	if !ok || v == "" || strings.Trim(v, "0123456789") != "" {
		return p.errorf(n, "malformed header %q; want %q", line, formatHeader)
	}
	return p.errorf(n, "format version v%s; this seqkeeper understands only %s: upgrade seqkeeper to read this sequence", v, formatVersion)
}

func (p *stateParser) setField(s *State, key, value string) error {
	n := p.lines[key]
	if key == "recycled" {
		if value == "" {
			return nil
		}
		tokens := strings.Split(value, " ")
		if len(tokens) > MaxRecycledRanges {
			return p.errorf(n, "recycled has %d ranges, more than the cap of %d", len(tokens), MaxRecycledRanges)
		}
		s.Recycled = make(Ranges, 0, len(tokens))
		for _, tok := range tokens {
			if tok == "" {
				return p.errorf(n, "recycled: empty range (separate ranges with single spaces)")
			}
			r, err := ParseRange(tok)
			if err != nil {
				return p.errorf(n, "recycled: %v", err)
			}
			s.Recycled = append(s.Recycled, r)
		}
		return nil
	}
	if key == "pushed" {
		if value == "" {
			return nil
		}
		// Copied out of the znode's text, here and for the marker: a
		// State that holds a piece of the text holds all of it (the
		// primary keeps one State per sequence).
		keys := strings.Split(strings.Clone(value), " ")
		if len(keys) > MaxPushKeys {
			return p.errorf(n, "pushed has %d keys, more than the cap of %d", len(keys), MaxPushKeys)
		}
		for _, k := range keys {
			if k == "" {
				return p.errorf(n, "pushed: empty key (separate keys with single spaces)")
			}
		}
		s.Pushed = keys // checked by problem, which names this line
		return nil
	}
	if key == "marker" {
		if !validMarker(value) {
			return p.errorf(n, "marker %q is not %s followed by 16 lowercase hex digits", value, MarkerPrefix)
		}
		s.Marker = strings.Clone(value)
		return nil
	}
	v, err := parseNumber(value)
	if err != nil {
		return p.errorf(n, "%s: %v", key, err)
	}
	switch key {
	case "start":
		s.Start = v
	case "next":
		s.Next = v
	case "ceiling":
		s.Ceiling = v
	case "end":
		s.End = v
	case "windows":
		if v < 0 || v > MaxWindows {
			return p.errorf(n, "windows %d is outside 0..%d", v, MaxWindows)
		}
		s.Windows = int(v)
	case "leaked":
		s.Leaked = v
	case "zkepoch":
		s.ZKEpoch = v
	case "pushfloor":
		s.PushFloor = v
	}
	return nil
}
