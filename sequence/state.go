package sequence

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// MaxID is the default end of the ID space. A sequence whose End is
	// MaxID never hands out MaxID itself: Next must stay representable, and
	// Next = End+1 would overflow, so such a space is exhausted once Next
	// reaches MaxID.
	MaxID int64 = math.MaxInt64

	// DefaultStart is the first ID of a sequence registered without a start
	// value. IDs start at 1 because 0 is a "no ID" value in many of the
	// legacy systems the IDs feed.
	DefaultStart int64 = 1

	// MaxRecycledRanges caps the recycled list so a sequence znode stays far
	// below ZooKeeper's 1 MB limit: at the cap, with 19-digit numbers, the
	// encoded state is about 40 KB. When a push would exceed it, Push drops
	// the smallest ranges and counts their IDs in Leaked: IDs are leaked,
	// never risked being handed out twice.
	MaxRecycledRanges = 1000

	// MaxWindows bounds State.Windows. Every window is a znode the primary
	// keeps topped up; beyond a thousand, more windows add ZooKeeper load
	// without reducing CAS contention any further.
	MaxWindows = 1024

	// MaxLegacyCounter is the highest value a legacy 8-byte counter may hold.
	// Below 2^61 its first byte is a control byte (< 0x20), which is how
	// ParseState tells it from the text format, whose every form starts with
	// a printable byte. A larger counter would be misread as text, so the
	// sequence must be migrated to the text format before it gets there.
	MaxLegacyCounter int64 = 1<<61 - 1

	// MaxPushKeys bounds State.Pushed, the idempotency keys of the most
	// recent keyed pushes (Client.PushOnce). It bounds how long a retried
	// push gets a definite answer: the retry finds its key, and is answered
	// "already applied", while fewer than MaxPushKeys other keyed pushes to
	// the same sequence came in between. After that the key has been
	// dropped (oldest first) and the retry is pushed again; the overlap
	// check still refuses it while the IDs are in the recycled list, but
	// not once another client has taken them. 64 keys of at most
	// MaxPushKeyLen bytes add at most about 4 KB to the znode, a tenth of
	// the recycled list's worst case, and cover retries of a caller whose
	// sequence sees fewer than 64 keyed pushes per retry interval.
	MaxPushKeys = 64

	// MaxPushKeyLen is the longest idempotency key (see ValidatePushKey).
	// A UUID (36 characters) fits.
	MaxPushKeyLen = 64
)

var (
	// ErrCorrupt reports sequence data that cannot be parsed or breaks an
	// invariant of State. Acting on such data could hand out IDs twice, so
	// callers must stop and have the znode repaired, not guess.
	ErrCorrupt = errors.New("corrupt state")

	// ErrExhausted reports that a sequence has handed out every ID of its
	// space and holds no recycled IDs. Waiting does not help: the space must
	// be extended or a new sequence used.
	ErrExhausted = errors.New("ID space exhausted")

	// ErrBadPush reports a push that was refused because accepting it could
	// hand an ID out twice (IDs never issued, outside the space, or already
	// recycled). The state is unchanged when it is returned.
	ErrBadPush = errors.New("push refused")

	// ErrInvalidPushKey reports an idempotency key that breaks the key
	// grammar (see ValidatePushKey). Nothing was pushed.
	ErrInvalidPushKey = errors.New("invalid push key")
)

// ValidatePushKey reports whether key can be the idempotency key of a push
// (Client.PushOnce): 1 to MaxPushKeyLen of A-Z a-z 0-9 . _ -, so that it is
// one word of the state's "pushed" line. The error wraps
// ErrInvalidPushKey.
func ValidatePushKey(key string) error {
	why := ""
	switch {
	case key == "":
		why = "it is empty"
	case len(key) > MaxPushKeyLen:
		why = fmt.Sprintf("it is %d bytes long", len(key))
	default:
		for i := 0; i < len(key); i++ {
			if b := key[i]; !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
				why = fmt.Sprintf("byte %d is %q", i+1, b)
				break
			}
		}
	}
	if why != "" {
		return fmt.Errorf("%w %q: %s; use 1 to %d of A-Z a-z 0-9 . _ - (a random UUID per logical push, the same on every retry)",
			ErrInvalidPushKey, key, why, MaxPushKeyLen)
	}
	return nil
}

// formatHeader is the first line of the full text form. The version lets a
// newer seqkeeper change the format while an older one refuses, rather than
// misreads, data it does not understand.
const (
	formatName    = "seqkeeper-sequence"
	formatVersion = "v1"
	formatHeader  = formatName + " " + formatVersion
)

// State is the decoded data of a sequence znode /<root>/<name>.
//
// A State comes in three forms. A full state (neither Legacy nor Registered)
// is what the primary maintains and clients take from. A registration
// (Registered) is what an operator creates to ask the primary to start a
// sequence. A legacy state (Legacy) is a bare 8-byte counter kept for
// workers that increment it themselves.
//
// Take and Push never write into the backing array of Recycled; they replace
// the slice. A copy of a State made before a call therefore stays intact,
// which lets a client keep its cached state when a compare-and-set fails.
type State struct {
	// Name is the sequence name. It is not encoded; it only makes errors
	// name the sequence they are about.
	Name string

	// Legacy marks a znode holding a bare 8-byte big-endian counter. Only
	// Next is stored: it holds the raw counter, the highest ID possibly
	// issued, and Take hands out Next+1 upwards. A legacy counter has no
	// ceiling: Take enforces none, and the primary can only persist
	// reserve-ahead marks after it notices the counter moved, so IDs taken
	// faster than it reacts are not yet covered by the store. ParseState
	// sets Start to 1 and Ceiling and End to MaxLegacyCounter, for display
	// only; Take, Available and Validate ignore them.
	Legacy bool

	// Registered marks a znode created by an operator but not yet
	// initialised by the primary. Only Start, End and Windows mean anything;
	// Next, Ceiling, Recycled and Leaked are zero. Nothing can be taken from
	// it until the primary initialises it.
	Registered bool

	// Start is the first ID of the space (>= 1).
	Start int64

	// Next is the lowest ID never issued: Start <= Next <= End+1. IDs are
	// issued in ascending order, so every ID below Next has been handed out
	// at least once (it may since have been pushed back into Recycled).
	Next int64

	// Ceiling is the highest ID clients may issue: Next-1 <= Ceiling <= End.
	// The primary raises it only after the durable store has accepted the
	// higher value, so every issued ID is covered by the store and a
	// restore to the stored ceiling + 1 never reissues one.
	Ceiling int64

	// End is the last ID of the space.
	End int64

	// Windows is the configured number of open windows, 0 for a plain
	// sequence, at most MaxWindows.
	Windows int

	// Recycled holds IDs pushed back, all in [Start, Next-1], ascending.
	// Take hands out the lowest first, so the oldest holes are filled first.
	// At most MaxRecycledRanges ranges.
	Recycled Ranges

	// Leaked counts IDs dropped because the recycled list hit its cap. They
	// are never handed out again; the counter tells the operator how many
	// were lost that way.
	Leaked int64

	// ZKEpoch is the ZooKeeper epoch (the high 32 bits of a zxid) in which
	// the primary last validated this state against the durable store. Every
	// ZooKeeper leader election starts a new epoch, and only a leader
	// election (a restart, a failover, a restore from an older copy) can
	// roll data back, so a client hands out IDs only from a write whose zxid
	// is in this epoch; after any election it waits until the primary has
	// fast-forwarded the sequence past the stored ceiling and stamped the
	// new epoch. 0 means never validated.
	ZKEpoch int64

	// Marker names the child znode (MarkerPrefix and 16 random hex digits)
	// that the primary created, in the same transaction as this stamp, when
	// it validated the state. An epoch number alone does not identify a
	// history: a restore from an older copy starts epoch copy+1, which the
	// lost history may already have used. A random marker does: every write
	// of a validated state is a transaction that first checks that the
	// marker exists, so a write prepared in another history, or for an
	// earlier incarnation of a deleted and re-created znode, fails instead
	// of landing. Empty means not validated (ZKEpoch is then ignored).
	Marker string

	// PushFloor is next as it was when the primary last stamped the state
	// (validated it in a new ZooKeeper epoch or history, initialised or
	// restored it). A keyed push (PushOnce) whose key is not recorded is
	// refused for IDs below it: those IDs were handed out before ZooKeeper's
	// latest leader election, which may have been a restore that lost the
	// write recording the key, so the push may be the retry of one applied
	// in the lost history (where its IDs may then have been handed out
	// again). They are lost instead. 0: no floor.
	PushFloor int64

	// Pushed holds the idempotency keys of the most recent keyed pushes
	// (PushOnce, Client.PushOnce), oldest first, distinct, at most
	// MaxPushKeys. A key is recorded in the same write as its push, so a
	// key listed here means that push was applied: a retry of it changes
	// nothing. The keys are kept when the primary revalidates or rotates the
	// state (which may drop the recycled IDs the push added: a retry must
	// still be answered "already applied", never applied twice); they are
	// lost with ZooKeeper's data, as the recycled list is. Legacy counters
	// and registrations, which accept no pushes, carry none.
	Pushed []string
}

// MarkerPrefix starts the name of the marker child znode of a validated
// sequence; see State.Marker.
const MarkerPrefix = "h-"

// validMarker reports whether m is a marker name: MarkerPrefix and 16
// lowercase hex digits.
func validMarker(m string) bool {
	hex, ok := strings.CutPrefix(m, MarkerPrefix)
	return ok && len(hex) == 16 && strings.Trim(hex, "0123456789abcdef") == ""
}

// Validated reports whether s carries a complete validation stamp (an epoch
// and a marker). Clients hand out IDs only from validated states.
func (s State) Validated() bool { return s.ZKEpoch != 0 && s.Marker != "" }

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
		keys := strings.Split(value, " ")
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
		s.Marker = value
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
	case s.PushFloor < 0 || s.PushFloor > s.Next:
		return "pushfloor", fmt.Sprintf("pushfloor %d is outside 0..next (%d)", s.PushFloor, s.Next)
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

// last is the highest ID Take may ever issue fresh: End, except that with
// End = math.MaxInt64 Next could not move past it, so that one ID is never
// issued.
func (s State) last() int64 {
	return min(s.End, math.MaxInt64-1)
}

// fresh is the number of never-issued IDs clients may take now.
func (s State) fresh() int64 {
	hi := min(s.Ceiling, s.last())
	if hi < s.Next {
		return 0
	}
	return hi - s.Next + 1
}

// Available returns how many IDs Take could hand out right now: the recycled
// IDs plus the fresh ones up to the ceiling (saturating at math.MaxInt64).
// A registration has none until the primary initialises it.
func (s State) Available() int64 {
	switch {
	case s.Registered:
		return 0
	case s.Legacy:
		return max(0, MaxLegacyCounter-s.Next)
	}
	return AddSat(s.Recycled.Count(), s.fresh())
}

// Take removes up to n IDs from s and returns them, ascending and coalesced.
// Recycled IDs go first, lowest first, so old holes close before the counter
// moves; then fresh IDs from Next, never above Ceiling. When fewer than n are
// available it returns what there is; at the ceiling, and for a registration
// not yet initialised, that is nothing (an empty result and a nil error): the
// caller should wait for the primary to raise the ceiling. It returns an
// error wrapping ErrExhausted once the whole space has been issued and
// nothing is recycled. On error s is unchanged.
//
// A legacy counter has no ceiling: Take hands out Next+1 to Next+n, up to
// MaxLegacyCounter.
func (s *State) Take(n int64) (Ranges, error) {
	if n < 1 {
		return nil, fmt.Errorf("sequence %q: take %d: the count must be at least 1", s.Name, n)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch {
	case s.Registered:
		return nil, nil
	case s.Legacy:
		if s.Next >= MaxLegacyCounter {
			return nil, fmt.Errorf("sequence %q: %w: legacy counter is at its maximum %d; migrate the sequence to the text format", s.Name, ErrExhausted, MaxLegacyCounter)
		}
		k := min(n, MaxLegacyCounter-s.Next)
		out := Ranges{{s.Next + 1, s.Next + k}}
		s.Next += k
		return out, nil
	}
	if len(s.Recycled) == 0 && s.Next > s.last() {
		return nil, fmt.Errorf("sequence %q: %w: every ID up to end %d has been issued; extend the end of the space or move to a new sequence", s.Name, ErrExhausted, s.End)
	}

	var out Ranges
	rest := s.Recycled
	for len(rest) > 0 && n > 0 {
		r := rest[0]
		if r.Len() > n {
			out = append(out, Range{r.Start, r.Start + n - 1})
			// A new slice, not rest[0] = ...: the caller's copy of the
			// state may share the backing array.
			rest = append(Ranges{{r.Start + n, r.End}}, rest[1:]...)
			n = 0
			break
		}
		out = append(out, r)
		n -= r.Len()
		rest = rest[1:]
	}
	if len(rest) == 0 {
		rest = nil
	}
	s.Recycled = rest

	if k := min(n, s.fresh()); k > 0 {
		fresh := Range{s.Next, s.Next + k - 1}
		// The highest recycled range may end at Next-1; keep out coalesced.
		if len(out) > 0 && out[len(out)-1].End == fresh.Start-1 {
			out[len(out)-1].End = fresh.End
		} else {
			out = append(out, fresh)
		}
		s.Next += k
	}
	return out, nil
}

// Push returns IDs to s for reuse. It refuses, with an error wrapping
// ErrBadPush, any range that lies outside the space, holds IDs never issued
// (>= Next), or overlaps the recycled list: accepting any of those could hand
// an ID out twice. Refusal is all-or-nothing; on error s is unchanged.
//
// Pushed ranges are merged into Recycled and coalesced with their
// neighbours. If the list would then exceed MaxRecycledRanges, the smallest
// ranges (ties: the highest-numbered) are dropped until it fits and their IDs
// are added to Leaked. The policy is to leak IDs, never to duplicate them;
// dropping the smallest ranges loses the fewest IDs per range saved.
//
// Legacy counters and registrations accept no pushes: the 8-byte form has
// nowhere to keep the IDs (a worker should drop them), and a registration has
// issued nothing.
func (s *State) Push(rs Ranges) error {
	return s.push(rs, MaxRecycledRanges)
}

// push is Push with the cap as a parameter, so that tests can reach the cap
// policy with a handful of ranges.
func (s *State) push(rs Ranges, limit int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	refuse := func(what string, format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s: %s", s.Name, ErrBadPush, what, fmt.Sprintf(format, args...))
	}
	all := "ranges " + rs.String()
	switch {
	case s.Legacy:
		return refuse(all, "a legacy 8-byte counter cannot keep recycled IDs; drop them instead (they are lost, never reused)")
	case s.Registered:
		return refuse(all, "the sequence is not initialised yet, so it has issued no IDs")
	}
	in, err := NormalizeRanges(rs)
	if err != nil {
		return refuse(all, "%v", err)
	}
	for _, r := range in {
		if r.Start < s.Start || r.End > s.End {
			return refuse("range "+r.String(), "outside the space %s of the sequence", Range{s.Start, s.End})
		}
		if r.End >= s.Next {
			return refuse("range "+r.String(), "IDs from %d were never issued (next is %d); push back only IDs this sequence handed out", max(r.Start, s.Next), s.Next)
		}
		// The first recycled range not entirely below r is the only one
		// that can overlap it.
		i, _ := slices.BinarySearchFunc(s.Recycled, r.Start, func(x Range, id int64) int { return cmp.Compare(x.End, id) })
		if i < len(s.Recycled) && s.Recycled[i].Start <= r.End {
			return refuse("range "+r.String(), "overlaps recycled range %s: those IDs were already pushed back, pushing them again would hand them out twice", s.Recycled[i])
		}
	}

	merged := make(Ranges, 0, len(s.Recycled)+len(in))
	a, b := s.Recycled, in
	for len(a) > 0 || len(b) > 0 {
		var r Range
		if len(b) == 0 || len(a) > 0 && a[0].Start < b[0].Start {
			r, a = a[0], a[1:]
		} else {
			r, b = b[0], b[1:]
		}
		if n := len(merged); n > 0 && merged[n-1].End == r.Start-1 {
			merged[n-1].End = r.End
			continue
		}
		merged = append(merged, r)
	}
	leaked := int64(0)
	if len(merged) > limit {
		merged, leaked = dropSmallest(merged, len(merged)-limit)
	}
	s.Recycled = merged
	s.Leaked = AddSat(s.Leaked, leaked)
	return nil
}

// HasPushKey reports whether s records a push made with idempotency key:
// that push was applied.
func (s State) HasPushKey(key string) bool { return slices.Contains(s.Pushed, key) }

// PushOnce is Push made idempotent by key (see ValidatePushKey). If s
// already records key, the push with that key was applied before: PushOnce
// changes nothing and reports already. Otherwise it pushes rs as Push does
// and records key in Pushed, dropping the oldest key beyond MaxPushKeys;
// writing s then records the key atomically with the push. A push refused
// (ErrBadPush) records nothing. An empty rs changes nothing. On error s is
// unchanged.
//
// Like Push, PushOnce replaces Pushed rather than writing into its backing
// array, so copies of s stay intact.
func (s *State) PushOnce(rs Ranges, key string) (already bool, err error) {
	return s.pushOnce(rs, key, MaxRecycledRanges)
}

// pushOnce is PushOnce with the recycled list's cap as a parameter (see
// push).
func (s *State) pushOnce(rs Ranges, key string, limit int) (already bool, err error) {
	if err := ValidatePushKey(key); err != nil {
		return false, fmt.Errorf("sequence %q: %w", s.Name, err)
	}
	if err := s.Validate(); err != nil {
		return false, err
	}
	if s.HasPushKey(key) {
		return true, nil
	}
	if len(rs) == 0 {
		return false, nil
	}
	for _, r := range rs {
		if r.Start < s.PushFloor {
			return false, fmt.Errorf("sequence %q: %w: range %s with key %s: IDs below %d were handed out before ZooKeeper's latest leader election, which may have lost the record of this push if it is a retry; treat them as lost",
				s.Name, ErrBadPush, r, key, s.PushFloor)
		}
	}
	if err := s.push(rs, limit); err != nil {
		return false, err
	}
	keep := s.Pushed[max(0, len(s.Pushed)+1-MaxPushKeys):]
	keys := make([]string, 0, len(keep)+1)
	s.Pushed = append(append(keys, keep...), key)
	return false, nil
}

// dropSmallest removes the k smallest ranges of rs (ties: the highest
// first, so the oldest holes survive) and returns the rest, still in order,
// and the number of IDs dropped. Dropping a range only widens the gap between
// its neighbours, so the result stays coalesced.
func dropSmallest(rs Ranges, k int) (Ranges, int64) {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		if c := cmp.Compare(rs[i].Len(), rs[j].Len()); c != 0 {
			return c
		}
		return cmp.Compare(rs[j].Start, rs[i].Start)
	})
	drop := make([]bool, len(rs))
	var leaked int64
	for _, i := range order[:k] {
		drop[i] = true
		leaked = AddSat(leaked, rs[i].Len())
	}
	kept := make(Ranges, 0, len(rs)-k)
	for i, r := range rs {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	return kept, leaked
}
