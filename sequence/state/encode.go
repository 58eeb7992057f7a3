package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Encode returns the znode data for s: 8 big-endian bytes of Next for a
// legacy state, the header and start (plus end and windows when not the
// defaults) for a registration, and otherwise the full form with keys in a
// fixed order, windows, recycled, leaked, zkepoch, marker and pushed omitted when zero. The output is
// canonical: ParseState of it gives s back and re-encodes to the same bytes.
// Encode does not validate; call Validate before writing.
func (s State) Encode() []byte {
	if s.Legacy {
		return binary.BigEndian.AppendUint64(nil, uint64(s.Next))
	}
	b := make([]byte, 0, 128+40*len(s.Recycled))
	b = append(b, formatHeader+"\n"...)
	line := func(key string, v int64) {
		b = append(b, key...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
		b = append(b, '\n')
	}
	line("start", s.Start)
	if s.Registered {
		if s.End != MaxID {
			line("end", s.End)
		}
		if s.Windows != 0 {
			line("windows", int64(s.Windows))
		}
		return b
	}
	line("next", s.Next)
	line("ceiling", s.Ceiling)
	line("end", s.End)
	if s.Windows != 0 {
		line("windows", int64(s.Windows))
	}
	if len(s.Recycled) > 0 {
		b = append(b, "recycled"...)
		for _, r := range s.Recycled {
			b = append(b, ' ')
			b = strconv.AppendInt(b, r.Start, 10)
			if r.End != r.Start {
				b = append(b, ':')
				b = strconv.AppendInt(b, r.End, 10)
			}
		}
		b = append(b, '\n')
	}
	if s.Leaked != 0 {
		line("leaked", s.Leaked)
	}
	if s.ZKEpoch != 0 {
		line("zkepoch", s.ZKEpoch)
	}
	if s.Marker != "" {
		b = append(b, "marker "+s.Marker+"\n"...)
	}
	if s.PushFloor != 0 {
		line("pushfloor", s.PushFloor)
	}
	if len(s.Pushed) > 0 {
		b = append(b, "pushed"...)
		for _, k := range s.Pushed {
			b = append(b, ' ')
			b = append(b, k...)
		}
		b = append(b, '\n')
	}
	return b
}

// Equal reports whether s and o encode the same znode data.
func (s State) Equal(o State) bool {
	if s.Legacy != o.Legacy || s.Registered != o.Registered || s.Start != o.Start || s.Next != o.Next ||
		s.Ceiling != o.Ceiling || s.End != o.End || s.Windows != o.Windows || s.Leaked != o.Leaked ||
		s.ZKEpoch != o.ZKEpoch || s.Marker != o.Marker || s.PushFloor != o.PushFloor || len(s.Recycled) != len(o.Recycled) || !slices.Equal(s.Pushed, o.Pushed) {
		return false
	}
	for i := range s.Recycled {
		if s.Recycled[i] != o.Recycled[i] {
			return false
		}
	}
	return true
}

// Validate checks every invariant of s; each one guards against handing out
// an ID twice or above the durable ceiling. The error wraps ErrCorrupt and
// names the sequence and the broken invariant.
func (s State) Validate() error {
	if _, msg := s.problem(); msg != "" {
		return fmt.Errorf("sequence %q: %w: %s", s.Name, ErrCorrupt, msg)
	}
	return nil
}

// problem returns the first broken invariant of s and the key it concerns,
// so that ParseState can point at the line; msg is "" when s is valid.
func (s State) problem() (key, msg string) {
	switch {
	case s.Legacy && s.Registered:
		return "", "both legacy and registered"
	case s.Legacy:
		switch {
		case s.Next < 0:
			return "", fmt.Sprintf("legacy counter %d is negative", s.Next)
		case s.Next > MaxLegacyCounter:
			return "", fmt.Sprintf("legacy counter %d is above %d, where it can no longer be told apart from text; migrate the sequence to the text format", s.Next, MaxLegacyCounter)
		case len(s.Recycled) > 0 || s.Windows != 0 || s.Leaked != 0 || s.ZKEpoch != 0 || s.Marker != "" || s.PushFloor != 0 || len(s.Pushed) > 0:
			return "", "a legacy counter can hold no recycled IDs, windows, leaked count, validation stamp or push keys"
		}
		return "", ""
	}
	switch {
	case s.Start < 1:
		return "start", fmt.Sprintf("start %d is below 1 (IDs start at 1)", s.Start)
	case s.End < s.Start:
		return "end", fmt.Sprintf("end %d is below start %d", s.End, s.Start)
	case s.Windows < 0 || s.Windows > MaxWindows:
		return "windows", fmt.Sprintf("windows %d is outside 0..%d", s.Windows, MaxWindows)
	}
	if s.Registered {
		if s.Next != 0 || s.Ceiling != 0 || len(s.Recycled) > 0 || s.Leaked != 0 || s.ZKEpoch != 0 || s.Marker != "" || s.PushFloor != 0 || len(s.Pushed) > 0 {
			return "", "a registration carries no next, ceiling, recycled IDs, leaked count, zkepoch, marker or push keys"
		}
		return "", ""
	}
	// Start >= 1 from here on, so Next-1 and r.Start-1 cannot overflow, and
	// End+1 (which can) is never computed.
	switch {
	case s.Next < s.Start:
		return "next", fmt.Sprintf("next %d is below start %d", s.Next, s.Start)
	case s.Next-1 > s.End:
		return "next", fmt.Sprintf("next %d is more than one past end %d", s.Next, s.End)
	case s.Ceiling < s.Next-1:
		return "ceiling", fmt.Sprintf("ceiling %d is below next-1 (%d): IDs up to %d were issued above the durable ceiling", s.Ceiling, s.Next-1, s.Next-1)
	case s.Ceiling > s.End:
		return "ceiling", fmt.Sprintf("ceiling %d is above end %d", s.Ceiling, s.End)
	case s.Leaked < 0:
		return "leaked", fmt.Sprintf("leaked %d is negative", s.Leaked)
	case s.ZKEpoch < 0 || s.ZKEpoch > math.MaxUint32:
		return "zkepoch", fmt.Sprintf("zkepoch %d is outside 0..%d", s.ZKEpoch, uint32(math.MaxUint32))
	case s.Marker != "" && !validMarker(s.Marker):
		return "marker", fmt.Sprintf("marker %q is not %s followed by 16 lowercase hex digits", s.Marker, MarkerPrefix)
	case s.PushFloor < 0 || s.PushFloor > s.Next && s.Next <= s.last():
		return "pushfloor", fmt.Sprintf("pushfloor %d is outside 0..next (%d), and the space is not used up", s.PushFloor, s.Next)
	case len(s.Recycled) > MaxRecycledRanges:
		return "recycled", fmt.Sprintf("recycled has %d ranges, more than the cap of %d", len(s.Recycled), MaxRecycledRanges)
	}
	if msg := s.Recycled.canonicalProblem(); msg != "" {
		return "recycled", "recycled: " + msg
	}
	if msg := pushedProblem(s.Pushed); msg != "" {
		return "pushed", msg
	}
	if len(s.Recycled) > 0 {
		if lo := s.Recycled[0]; lo.Start < s.Start {
			return "recycled", fmt.Sprintf("recycled range %s is below start %d", lo, s.Start)
		}
		if hi := s.Recycled[len(s.Recycled)-1]; hi.End >= s.Next {
			return "recycled", fmt.Sprintf("recycled range %s holds IDs never issued (next is %d)", hi, s.Next)
		}
	}
	return "", ""
}

// pushedProblem checks the push keys: at most MaxPushKeys, each valid, no
// two alike.
func pushedProblem(keys []string) string {
	if len(keys) > MaxPushKeys {
		return fmt.Sprintf("pushed has %d keys, more than the cap of %d", len(keys), MaxPushKeys)
	}
	for i, k := range keys {
		if err := ValidatePushKey(k); err != nil {
			return "pushed: " + err.Error()
		}
		if j := slices.Index(keys[:i], k); j >= 0 {
			return fmt.Sprintf("pushed: key %q is listed twice (keys %d and %d)", k, j+1, i+1)
		}
	}
	return ""
}
