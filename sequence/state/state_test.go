package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// stateText joins lines into znode data with a trailing newline.
func stateText(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// legacyData is the 8-byte big-endian form of counter.
func legacyData(counter uint64) []byte { return binary.BigEndian.AppendUint64(nil, counter) }

func TestParseStateAccepts(t *testing.T) {
	const name = "orders"
	full := func(mod func(*State)) State {
		s := State{Name: name, Start: 1, Next: 1001, Ceiling: 5000, End: MaxID}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	reg := func(start, end int64, windows int) State {
		return State{Name: name, Registered: true, Start: start, End: end, Windows: windows}
	}
	tests := []struct {
		name      string
		data      []byte
		want      State
		canonical bool // Encode(want) must give data back byte for byte
	}{
		{"empty registration", nil, reg(1, MaxID, 0), false},
		{"whitespace registration", []byte(" \n"), reg(1, MaxID, 0), false},
		{"bare start", []byte("1000"), reg(1000, MaxID, 0), false},
		{"bare start with whitespace", []byte("  42\r\n"), reg(42, MaxID, 0), false},
		{"bare start of 7 digits and a newline", []byte("1234567\n"), reg(1234567, MaxID, 0), false},
		{"bare start max", []byte("9223372036854775807"), reg(MaxID, MaxID, 0), false},
		{"header only", stateText(formatHeader), reg(1, MaxID, 0), false},
		{"canonical registration", stateText(formatHeader, "start 1"), reg(1, MaxID, 0), true},
		{"canonical registration with end and windows", stateText(formatHeader, "start 5", "end 100", "windows 3"), reg(5, 100, 3), true},
		{"registration without header", stateText("start 5", "windows 2"), reg(5, MaxID, 2), false},
		{"registration keys in any order", stateText("windows 2", "end 9", "start 5"), reg(5, 9, 2), false},
		{"registration without trailing newline", []byte("start 5"), reg(5, MaxID, 0), false},
		{"legacy zero", legacyData(0), State{Name: name, Legacy: true, Start: 1, Next: 0, Ceiling: MaxLegacyCounter, End: MaxLegacyCounter}, true},
		{"legacy counter", legacyData(123456), State{Name: name, Legacy: true, Start: 1, Next: 123456, Ceiling: MaxLegacyCounter, End: MaxLegacyCounter}, true},
		{"legacy max", legacyData(1<<61 - 1), State{Name: name, Legacy: true, Start: 1, Next: MaxLegacyCounter, Ceiling: MaxLegacyCounter, End: MaxLegacyCounter}, true},
		{"full minimal", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807"), full(nil), true},
		{"full everything", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "windows 4", "recycled 10:20 30 40:45", "leaked 7"),
			full(func(s *State) { s.Windows = 4; s.Recycled = Ranges{{10, 20}, {30, 30}, {40, 45}}; s.Leaked = 7 }), true},
		{"full keys in any order", stateText(formatHeader, "end 9223372036854775807", "ceiling 5000", "next 1001", "start 1"), full(nil), false},
		{"full with CRLF", []byte(formatHeader + "\r\nstart 1\r\nnext 1001\r\nceiling 5000\r\nend 9223372036854775807\r\n"), full(nil), false},
		{"full without trailing newline", []byte(formatHeader + "\nstart 1\nnext 1001\nceiling 5000\nend 9223372036854775807"), full(nil), false},
		{"empty recycled", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "recycled"), full(nil), false},
		{"explicit zeros", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "windows 0", "recycled ", "leaked 0"), full(nil), false},
		{"single written as a range", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "recycled 5:5"),
			full(func(s *State) { s.Recycled = Ranges{{5, 5}} }), false},
		{"fresh sequence", stateText(formatHeader, "start 1", "next 1", "ceiling 0", "end 10"), State{Name: name, Start: 1, Next: 1, Ceiling: 0, End: 10}, true},
		{"exhausted sequence", stateText(formatHeader, "start 1", "next 11", "ceiling 10", "end 10"), State{Name: name, Start: 1, Next: 11, Ceiling: 10, End: 10}, true},
		{"recycled up to next-1", stateText(formatHeader, "start 5", "next 11", "ceiling 10", "end 10", "recycled 5 10"),
			State{Name: name, Start: 5, Next: 11, Ceiling: 10, End: 10, Recycled: Ranges{{5, 5}, {10, 10}}}, true},
		{"max next and ceiling", stateText(formatHeader, "start 1", "next 9223372036854775807", "ceiling 9223372036854775807", "end 9223372036854775807"),
			full(func(s *State) { s.Next, s.Ceiling = MaxID, MaxID }), true},
		{"max windows", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "windows 1024"), full(func(s *State) { s.Windows = 1024 }), true},
		{"push keys after the stamp", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "recycled 7", "zkepoch 3", "marker h-0123456789abcdef", "pushed 0b6f7e2c-1d2a-4c3b-9e8f-123456789abc a.B_c-9"),
			full(func(s *State) {
				s.Recycled, s.ZKEpoch, s.Marker = Ranges{{7, 7}}, 3, "h-0123456789abcdef"
				s.Pushed = []string{"0b6f7e2c-1d2a-4c3b-9e8f-123456789abc", "a.B_c-9"}
			}), true},
		{"push keys before other keys", stateText(formatHeader, "pushed k", "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807"),
			full(func(s *State) { s.Pushed = []string{"k"} }), false},
		{"empty pushed", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "pushed"), full(nil), false},
		{"pushed with an empty value", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "pushed "), full(nil), false},
		{"push keys at the cap, longest", stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "pushed "+strings.Join(capKeys(MaxPushKeys, MaxPushKeyLen), " ")),
			full(func(s *State) { s.Pushed = capKeys(MaxPushKeys, MaxPushKeyLen) }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseState(name, tt.data)
			if err != nil {
				t.Fatalf("ParseState: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseState =\n%+v\nwant\n%+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			enc := got.Encode()
			if tt.canonical && string(enc) != string(tt.data) {
				t.Errorf("Encode = %q, want the input back %q", enc, tt.data)
			}
			again, err := ParseState(name, enc)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("ParseState(Encode) = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

// capKeys returns n distinct push keys of length size (at least 4).
func capKeys(n, size int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%0*d", size, i)
	}
	return keys
}

func TestParseStateRejects(t *testing.T) {
	ok := []string{formatHeader, "start 1", "next 10", "ceiling 20", "end 100"}
	// with returns the valid full state ok with line i replaced by repl (or
	// appended when i == len(ok)); repl "" deletes the line.
	with := func(i int, repl string) []byte {
		lines := slices.Clone(ok)
		switch {
		case i == len(lines):
			lines = append(lines, repl)
		case repl == "":
			lines = slices.Delete(lines, i, i+1)
		default:
			lines[i] = repl
		}
		return stateText(lines...)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		// Not text.
		{"binary garbage", []byte{0xff, 0xfe, 0x00}, "not UTF-8"},
		{"short binary", []byte{0, 0, 0, 0, 0, 0, 1}, "unknown key"},
		{"long binary", []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}, "unknown key"},
		{"negative legacy", legacyData(math.MaxUint64), "legacy 8-byte counter is negative (-1)"},
		{"negative legacy min", legacyData(1 << 63), "negative"},
		{"counter above 2^61 reads as text", legacyData(0x2000000000000000), "line 1: unknown key"},
		// Bare registrations.
		{"bare zero", []byte("0"), "line 1: start 0 is below 1"},
		{"bare negative", []byte("-5"), "start -5 is below 1"},
		{"bare plus", []byte("+5"), "not a plain base-10"},
		{"bare leading zero", []byte("007"), "leading zero"},
		{"bare overflow", []byte("9223372036854775808"), "does not fit"},
		{"bare trailing junk", []byte("12ab"), "not a plain base-10"},
		{"two numbers", []byte("1 2"), `unknown key "1"`},
		// Structure.
		{"garbage", []byte("hello world"), `line 1: unknown key "hello"`},
		{"uppercase key", with(1, "Start 1"), `line 2: unknown key "Start"`},
		{"unknown key", with(5, "owner bob"), `line 6: unknown key "owner"`},
		{"key without value", with(1, "start"), "line 2: key start has no value"},
		{"tab separator", with(1, "start\t1"), "unknown key"},
		{"two spaces", with(1, "start  1"), "line 2: start: \" 1\" is not a plain base-10"},
		{"trailing space", with(1, "start 1 "), "not a plain base-10"},
		{"duplicate key", with(5, "next 10"), "line 6: duplicate key next (first on line 3)"},
		{"empty line", with(5, "\nleaked 1"), "line 6: empty line"},
		{"two trailing newlines", append(with(5, "leaked 1"), '\n'), "line 7: empty line"},
		{"lone CR line", with(2, "\r"), "line 3: empty line"},
		// Header.
		{"newer version", with(0, "seqkeeper-sequence v2"), "line 1: format version v2; this seqkeeper understands only v1: upgrade seqkeeper"},
		{"much newer version", with(0, "seqkeeper-sequence v10"), "upgrade"},
		{"malformed header", with(0, "seqkeeper-sequence"), "malformed header"},
		{"malformed version", with(0, "seqkeeper-sequence version1"), "malformed header"},
		{"header with trailing space", with(0, formatHeader+" "), "malformed header"},
		{"header not first", stateText("start 1", formatHeader, "next 10", "ceiling 20", "end 100"), "line 2: header \"seqkeeper-sequence v1\" must be the first line"},
		{"duplicate header", with(5, formatHeader), "line 6: header"},
		{"full state without header", with(0, ""), "line 1: a full state (one with next) must begin with the line"},
		{"missing start", with(1, ""), "missing key start"},
		{"missing ceiling", with(3, ""), "missing key ceiling"},
		{"missing end", with(4, ""), "missing key end"},
		{"registration with ceiling", stateText(formatHeader, "start 1", "ceiling 5"), "line 3: key ceiling without next"},
		{"registration with recycled", stateText("recycled 1"), "line 1: key recycled without next"},
		{"registration with leaked", stateText("start 3", "leaked 1"), "key leaked without next"},
		// Numbers.
		{"leading zero", with(2, "next 010"), "line 3: next: \"010\" has a leading zero"},
		{"negative zero", with(2, "next -0"), "leading zero"},
		{"plus sign", with(2, "next +10"), "not a plain base-10"},
		{"hex", with(2, "next 0xa"), "not a plain base-10"},
		{"overflow", with(4, "end 9223372036854775808"), "line 5: end: \"9223372036854775808\" does not fit"},
		{"empty value", with(2, "next "), "not a number"},
		// Invariants, pointing at the line of the offending key.
		{"start zero", with(1, "start 0"), "line 2: start 0 is below 1"},
		{"end below start", with(4, "end 0"), "line 5: end 0 is below start 1"},
		{"next below start", with(1, "start 11"), "line 3: next 10 is below start 11"},
		{"next past end+1", with(2, "next 102"), "line 3: next 102 is more than one past end 100"},
		{"ceiling below next-1", with(3, "ceiling 5"), "line 4: ceiling 5 is below next-1 (9)"},
		{"ceiling above end", with(3, "ceiling 101"), "line 4: ceiling 101 is above end 100"},
		{"negative leaked", with(5, "leaked -1"), "line 6: leaked -1 is negative"},
		{"windows too many", with(5, "windows 1025"), "line 6: windows 1025 is outside 0..1024"},
		{"windows negative", with(5, "windows -1"), "windows -1 is outside"},
		{"windows overflow", with(5, "windows 99999999999999999999"), "does not fit"},
		{"registration end below start", stateText("start 10", "end 5"), "line 2: end 5 is below start 10"},
		{"registration windows", stateText("start 10", "windows 5000"), "line 2: windows 5000"},
		// Recycled.
		{"recycled unsorted", with(5, "recycled 5 3"), "line 6: recycled: range 3 is not above 5"},
		{"recycled overlapping", with(5, "recycled 1:5 4:6"), "recycled: ranges 1:5 and 4:6 overlap"},
		{"recycled duplicate", with(5, "recycled 3 3"), "not above"},
		{"recycled adjacent", with(5, "recycled 1:2 3"), "ranges 1:2 and 3 are adjacent; write them as one range 1:3"},
		{"recycled never issued", with(5, "recycled 9:10"), "recycled range 9:10 holds IDs never issued (next is 10)"},
		{"recycled below start", stateText(formatHeader, "start 5", "next 10", "ceiling 20", "end 100", "recycled 3"), "recycled range 3 is below start 5"},
		{"recycled zero", with(5, "recycled 0"), "below 1"},
		{"recycled reversed", with(5, "recycled 5:3"), "above end"},
		{"recycled double space", with(5, "recycled 1  3"), "empty range"},
		{"recycled trailing space", with(5, "recycled 1 "), "empty range"},
		{"recycled leading space", with(5, "recycled  1"), "empty range"},
		{"recycled comma", with(5, "recycled 1,3"), "not a plain base-10"},
		{"recycled over the cap", with(5, "recycled "+strings.TrimSpace(strings.Repeat("1 ", MaxRecycledRanges+1))), "more than the cap of 1000"},
		// Push keys.
		{"pushed bad key", with(5, "pushed ok b@d"), `line 6: pushed: invalid push key "b@d": byte 2 is '@'`},
		{"pushed non-ASCII key", with(5, "pushed cl\u00e9"), "invalid push key"},
		{"pushed key too long", with(5, "pushed "+strings.Repeat("k", MaxPushKeyLen+1)), "line 6: pushed: invalid push key \"" + strings.Repeat("k", MaxPushKeyLen+1) + "\": it is 65 bytes long"},
		{"pushed key twice", with(5, "pushed a b a"), `line 6: pushed: key "a" is listed twice (keys 1 and 3)`},
		{"pushed over the cap", with(5, "pushed "+strings.Join(capKeys(MaxPushKeys+1, 4), " ")), "line 6: pushed has 65 keys, more than the cap of 64"},
		{"pushed double space", with(5, "pushed a  b"), "line 6: pushed: empty key"},
		{"pushed trailing space", with(5, "pushed a "), "empty key"},
		{"pushed tab", with(5, "pushed a\tb"), "invalid push key"},
		{"registration with pushed", stateText("start 3", "pushed k"), "line 2: key pushed without next"},
		{"registration with header and pushed", stateText(formatHeader, "start 3", "pushed"), "key pushed without next"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseState("orders", tt.data)
			if err == nil {
				t.Fatalf("ParseState(%q) = %+v, want error containing %q", tt.data, s, tt.want)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if !strings.HasPrefix(err.Error(), `sequence "orders": corrupt state: `) {
				t.Errorf("error %q does not start by naming the sequence", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := State{Name: "x", Start: 1, Next: 10, Ceiling: 20, End: 100}
	tests := []struct {
		name string
		mod  func(*State)
		want string // "" means valid
	}{
		{"good", func(*State) {}, ""},
		{"legacy ignores start, ceiling and end", func(s *State) { *s = State{Legacy: true, Next: 5} }, ""},
		{"legacy negative", func(s *State) { *s = State{Legacy: true, Next: -1} }, "negative"},
		{"legacy too big", func(s *State) { *s = State{Legacy: true, Next: MaxLegacyCounter + 1} }, "migrate the sequence to the text format"},
		{"legacy with recycled", func(s *State) { *s = State{Legacy: true, Next: 5, Recycled: Ranges{{1, 1}}} }, "legacy counter can hold no recycled"},
		{"legacy and registered", func(s *State) { s.Legacy, s.Registered = true, true }, "both"},
		{"registration", func(s *State) { *s = State{Registered: true, Start: 1, End: MaxID} }, ""},
		{"registration with next", func(s *State) { *s = State{Registered: true, Start: 1, End: MaxID, Next: 1} }, "registration carries no next"},
		{"registration bad start", func(s *State) { *s = State{Registered: true, End: MaxID} }, "start 0 is below 1"},
		{"next = end+1", func(s *State) { s.Next, s.Ceiling = 101, 100 }, ""},
		{"next = end+1 at MaxInt64 is unrepresentable, next = end is fine", func(s *State) { s.Next, s.Ceiling, s.End = MaxID, MaxID, MaxID }, ""},
		{"ceiling = next-1", func(s *State) { s.Ceiling = 9 }, ""},
		{"ceiling = start-1", func(s *State) { s.Next, s.Ceiling = 1, 0 }, ""},
		{"too many recycled", func(s *State) {
			s.Next, s.Ceiling, s.End = 1e6, 1e6, 1e6
			for i := range int64(MaxRecycledRanges + 1) {
				s.Recycled = append(s.Recycled, Range{2*i + 1, 2*i + 1})
			}
		}, "more than the cap"},
		{"windows", func(s *State) { s.Windows = -1 }, "windows -1"},
		{"push keys", func(s *State) { s.Pushed = capKeys(MaxPushKeys, 1+MaxPushKeyLen/2) }, ""},
		{"legacy with push keys", func(s *State) { *s = State{Legacy: true, Next: 5, Pushed: []string{"k"}} }, "push keys"},
		{"registration with push keys", func(s *State) { *s = State{Registered: true, Start: 1, End: MaxID, Pushed: []string{"k"}} }, "push keys"},
		{"too many push keys", func(s *State) { s.Pushed = capKeys(MaxPushKeys+1, 8) }, "pushed has 65 keys, more than the cap of 64"},
		{"empty push key", func(s *State) { s.Pushed = []string{"a", ""} }, "it is empty"},
		{"push key with a space", func(s *State) { s.Pushed = []string{"a b"} }, "invalid push key"},
		{"push key twice", func(s *State) { s.Pushed = []string{"a", "a"} }, "listed twice"},
		{"recycled never issued", func(s *State) { s.Recycled = Ranges{{10, 10}} }, "never issued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.mod(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrCorrupt)):
				t.Errorf("Validate() = %v, want ErrCorrupt containing %q", err, tt.want)
			}
		})
	}
}

func TestTake(t *testing.T) {
	base := State{Name: "orders", Start: 1, Next: 100, Ceiling: 199, End: 1000}
	tests := []struct {
		name     string
		state    func(*State)
		n        int64
		want     Ranges
		wantNext int64
		wantRec  Ranges
		wantErr  error
	}{
		{"fresh only", nil, 10, Ranges{{100, 109}}, 110, nil, nil},
		{"up to the ceiling", nil, 100, Ranges{{100, 199}}, 200, nil, nil},
		{"partial at the ceiling", nil, 500, Ranges{{100, 199}}, 200, nil, nil},
		{"at the ceiling", func(s *State) { s.Ceiling = 99 }, 5, nil, 100, nil, nil},
		{"recycled first, lowest first", func(s *State) { s.Recycled = Ranges{{5, 6}, {10, 19}} }, 5, Ranges{{5, 6}, {10, 12}}, 100, Ranges{{13, 19}}, nil},
		{"recycled exactly", func(s *State) { s.Recycled = Ranges{{5, 6}, {10, 19}} }, 12, Ranges{{5, 6}, {10, 19}}, 100, nil, nil},
		{"recycled then fresh", func(s *State) { s.Recycled = Ranges{{5, 6}} }, 5, Ranges{{5, 6}, {100, 102}}, 103, nil, nil},
		{"recycled then fresh, coalesced", func(s *State) { s.Recycled = Ranges{{90, 99}} }, 15, Ranges{{90, 104}}, 105, nil, nil},
		{"recycled at the ceiling", func(s *State) { s.Ceiling = 99; s.Recycled = Ranges{{7, 7}} }, 5, Ranges{{7, 7}}, 100, nil, nil},
		{"recycled after the space is exhausted", func(s *State) { s.Next, s.Ceiling, s.Recycled = 1001, 1000, Ranges{{7, 8}} }, 5, Ranges{{7, 8}}, 1001, nil, nil},
		{"last IDs of the space", func(s *State) { s.Next, s.Ceiling = 998, 1000 }, 5, Ranges{{998, 1000}}, 1001, nil, nil},
		{"exhausted", func(s *State) { s.Next, s.Ceiling = 1001, 1000 }, 1, nil, 1001, nil, ErrExhausted},
		{"single-ID space", func(s *State) { s.Start, s.Next, s.Ceiling, s.End = 7, 7, 7, 7 }, 3, Ranges{{7, 7}}, 8, nil, nil},
		{"top of int64", func(s *State) { s.Next, s.Ceiling, s.End = MaxID-3, MaxID, MaxID }, 10, Ranges{{MaxID - 3, MaxID - 1}}, MaxID, nil, nil},
		{"top of int64 exhausted", func(s *State) { s.Next, s.Ceiling, s.End = MaxID, MaxID, MaxID }, 1, nil, MaxID, nil, ErrExhausted},
		{"huge n", func(s *State) { s.Next, s.Ceiling, s.End = 1, MaxID, MaxID }, math.MaxInt64, Ranges{{1, MaxID - 1}}, MaxID, nil, nil},
		{"huge n with recycled", func(s *State) { s.Next, s.Ceiling, s.End, s.Recycled = 10, MaxID, MaxID, Ranges{{2, 3}} }, math.MaxInt64,
			Ranges{{2, 3}, {10, MaxID - 1}}, MaxID, nil, nil},
		{"registration", func(s *State) { *s = State{Registered: true, Start: 1, End: MaxID} }, 5, nil, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			if tt.state != nil {
				tt.state(&s)
			}
			before := s
			got, err := s.Take(tt.n)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Take(%d) error = %v, want %v", tt.n, err, tt.wantErr)
			}
			if err != nil {
				if !reflect.DeepEqual(s, before) {
					t.Errorf("state changed on error: %+v", s)
				}
				if !strings.Contains(err.Error(), `sequence "orders"`) {
					t.Errorf("error %q does not name the sequence", err)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Take(%d) = %v, want %v", tt.n, got, tt.want)
			}
			if s.Next != tt.wantNext || !slices.Equal(s.Recycled, tt.wantRec) {
				t.Errorf("after Take: next %d recycled %v, want next %d recycled %v", s.Next, s.Recycled, tt.wantNext, tt.wantRec)
			}
			if n := min(tt.n, before.Available()); got.Count() != n {
				t.Errorf("Take(%d) handed out %d IDs, want min(n, Available()) = %d", tt.n, got.Count(), n)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate after Take: %v", err)
			}
			if msg := got.canonicalProblem(); msg != "" {
				t.Errorf("result not canonical: %s", msg)
			}
		})
	}
}

func TestTakeErrors(t *testing.T) {
	s := State{Name: "orders", Start: 1, Next: 1, Ceiling: 10, End: 10}
	for _, n := range []int64{0, -1, math.MinInt64} {
		if _, err := s.Take(n); err == nil || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("Take(%d) error = %v, want a count error", n, err)
		}
	}
	bad := State{Name: "orders", Start: 1, Next: 5, Ceiling: 2, End: 10}
	if _, err := bad.Take(1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Take on an invalid state: error = %v, want ErrCorrupt", err)
	}
	exhausted := State{Name: "orders", Start: 1, Next: 11, Ceiling: 10, End: 10}
	_, err := exhausted.Take(1)
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "widen the space") || !strings.Contains(err.Error(), "issued or skipped") {
		t.Errorf("Take on an exhausted state: error = %v, want ErrExhausted with advice", err)
	}
}

func TestTakeLegacy(t *testing.T) {
	s := State{Name: "old", Legacy: true, Next: 41}
	got, err := s.Take(3)
	if err != nil || !slices.Equal(got, Ranges{{42, 44}}) || s.Next != 44 {
		t.Fatalf("Take(3) = %v, %v, next %d; want 42:44, next 44", got, err, s.Next)
	}
	if enc := s.Encode(); string(enc) != string(legacyData(44)) {
		t.Errorf("Encode = %x", enc)
	}
	s.Next = 0
	if got, _ := s.Take(1); !slices.Equal(got, Ranges{{1, 1}}) {
		t.Errorf("Take(1) from counter 0 = %v, want 1", got)
	}
	s.Next = MaxLegacyCounter - 2
	if got, _ := s.Take(10); !slices.Equal(got, Ranges{{MaxLegacyCounter - 1, MaxLegacyCounter}}) || s.Next != MaxLegacyCounter {
		t.Errorf("Take(10) near the legacy maximum = %v, next %d", got, s.Next)
	}
	if _, err := s.Take(1); !errors.Is(err, ErrExhausted) {
		t.Errorf("Take at the legacy maximum: error = %v, want ErrExhausted", err)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got := (State{Legacy: true, Next: 10}).Available(); got != MaxLegacyCounter-10 {
		t.Errorf("Available = %d", got)
	}
}

// TestTakeKeepsCopies checks that Take and Push never write into a backing
// array a copy of the state shares: the client keeps its cached state for a
// retry when its compare-and-set loses.
func TestTakeKeepsCopies(t *testing.T) {
	s := State{Name: "orders", Start: 1, Next: 100, Ceiling: 200, End: 1000, Recycled: Ranges{{10, 19}, {30, 39}, {50, 50}}}
	cached := s
	snapshot := slices.Clone(s.Recycled)
	if _, err := s.Take(3); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(Ranges{{60, 60}, {10, 12}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(15); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cached.Recycled, snapshot) {
		t.Errorf("cached copy changed: %v, want %v", cached.Recycled, snapshot)
	}
}

func TestPush(t *testing.T) {
	base := State{Name: "orders", Start: 10, Next: 100, Ceiling: 150, End: 1000, Recycled: Ranges{{20, 29}, {50, 50}}}
	tests := []struct {
		name    string
		push    Ranges
		want    Ranges
		wantErr string // "" means accepted
	}{
		{"nothing", nil, Ranges{{20, 29}, {50, 50}}, ""},
		{"apart", Ranges{{40, 41}}, Ranges{{20, 29}, {40, 41}, {50, 50}}, ""},
		{"below all", Ranges{{10, 11}}, Ranges{{10, 11}, {20, 29}, {50, 50}}, ""},
		{"joins the left neighbour", Ranges{{30, 35}}, Ranges{{20, 35}, {50, 50}}, ""},
		{"joins the right neighbour", Ranges{{45, 49}}, Ranges{{20, 29}, {45, 50}}, ""},
		{"bridges two", Ranges{{30, 49}}, Ranges{{20, 50}}, ""},
		{"up to next-1", Ranges{{99, 99}}, Ranges{{20, 29}, {50, 50}, {99, 99}}, ""},
		{"several, unsorted and adjacent", Ranges{{52, 60}, {51, 51}, {11, 12}}, Ranges{{11, 12}, {20, 29}, {50, 60}}, ""},
		{"never issued", Ranges{{95, 100}}, nil, "range 95:100: IDs from 100 were never issued (next is 100)"},
		{"all never issued", Ranges{{120, 130}}, nil, "never issued"},
		{"beyond the end", Ranges{{999, 1001}}, nil, "range 999:1001: outside the space 10:1000"},
		{"below start", Ranges{{5, 12}}, nil, "range 5:12: outside the space"},
		{"overlaps recycled", Ranges{{25, 35}}, nil, "range 25:35: overlaps recycled range 20:29"},
		{"contains recycled", Ranges{{40, 60}}, nil, "overlaps recycled range 50"},
		{"inside recycled", Ranges{{22, 23}}, nil, "overlaps recycled range 20:29"},
		{"same as recycled", Ranges{{50, 50}}, nil, "overlaps"},
		{"all-or-nothing", Ranges{{40, 41}, {50, 50}}, nil, "overlaps"},
		{"overlapping push", Ranges{{40, 45}, {44, 48}}, nil, "ranges 40:45 and 44:48 overlap"},
		{"invalid range", Ranges{{45, 40}}, nil, "above end"},
		{"zero", Ranges{{0, 0}}, nil, "below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			before := base
			before.Recycled = slices.Clone(base.Recycled)
			err := s.Push(tt.push)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadPush) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Push(%v) error = %v, want ErrBadPush containing %q", tt.push, err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), `sequence "orders": push refused: `) {
					t.Errorf("error %q does not name the sequence", err)
				}
				if !reflect.DeepEqual(s, before) {
					t.Errorf("state changed on a refused push: %+v", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("Push(%v): %v", tt.push, err)
			}
			if !slices.Equal(s.Recycled, tt.want) {
				t.Errorf("recycled = %v, want %v", s.Recycled, tt.want)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate after Push: %v", err)
			}
		})
	}
}

func TestPushRefusedForms(t *testing.T) {
	for _, s := range []State{
		{Name: "old", Legacy: true, Next: 10},
		{Name: "new", Registered: true, Start: 1, End: MaxID},
	} {
		err := s.Push(Ranges{{1, 2}})
		if !errors.Is(err, ErrBadPush) {
			t.Errorf("%s: Push error = %v, want ErrBadPush", s.Name, err)
		}
	}
	corrupt := State{Name: "bad", Start: 1, Next: 5, Ceiling: 2, End: 10}
	if err := corrupt.Push(Ranges{{1, 1}}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Push on an invalid state: error = %v, want ErrCorrupt", err)
	}
}

func TestPushCap(t *testing.T) {
	// Five ranges of lengths 3, 1, 2, 1, 4 (2:4 6 8:9 11 13:16), cap 3.
	s := State{Name: "orders", Start: 1, Next: 100, Ceiling: 100, End: 100, Recycled: Ranges{{2, 4}, {6, 6}, {8, 9}}, Leaked: 5}
	if err := s.push(Ranges{{13, 16}, {11, 11}}, 3); err != nil {
		t.Fatal(err)
	}
	// The two single IDs are the smallest; both go (ties: highest first).
	want := Ranges{{2, 4}, {8, 9}, {13, 16}}
	if !slices.Equal(s.Recycled, want) || s.Leaked != 7 {
		t.Fatalf("recycled %v leaked %d, want %v leaked 7", s.Recycled, s.Leaked, want)
	}
	// A tie for the last place: the highest-numbered of the equal ranges goes.
	if err := s.push(Ranges{{20, 21}}, 3); err != nil {
		t.Fatal(err)
	}
	want = Ranges{{2, 4}, {8, 9}, {13, 16}}
	if !slices.Equal(s.Recycled, want) || s.Leaked != 9 {
		t.Fatalf("recycled %v leaked %d, want %v leaked 9", s.Recycled, s.Leaked, want)
	}
	// Coalescing can keep a push under the cap.
	if err := s.push(Ranges{{5, 7}}, 3); err != nil {
		t.Fatal(err)
	}
	want = Ranges{{2, 9}, {13, 16}}
	if !slices.Equal(s.Recycled, want) || s.Leaked != 9 {
		t.Fatalf("recycled %v leaked %d, want %v leaked 9", s.Recycled, s.Leaked, want)
	}
}

func TestPushCapAtMaxRecycledRanges(t *testing.T) {
	s := State{Name: "orders", Start: 1, Next: 1e6, Ceiling: 1e6, End: 1e6}
	// MaxRecycledRanges ranges of length 2 (odd starts, gaps between).
	for i := range int64(MaxRecycledRanges) {
		s.Recycled = append(s.Recycled, Range{3*i + 1, 3*i + 2})
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(Ranges{{5000, 5000}}); err != nil {
		t.Fatal(err)
	}
	if len(s.Recycled) != MaxRecycledRanges || s.Leaked != 1 || s.Recycled.Contains(5000) {
		t.Errorf("after pushing a single ID at the cap: %d ranges, leaked %d; want the single dropped", len(s.Recycled), s.Leaked)
	}
	if err := s.Push(Ranges{{10000, 10009}}); err != nil {
		t.Fatal(err)
	}
	if !s.Recycled.Contains(10000) || s.Leaked != 3 || s.Recycled.Contains(3*(MaxRecycledRanges-1)+1) {
		t.Errorf("pushing a long range at the cap should drop the highest short one: leaked %d", s.Leaked)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
}

func TestValidatePushKey(t *testing.T) {
	for _, k := range []string{"a", "0", "-", "A.b_c-D", "0b6f7e2c-1d2a-4c3b-9e8f-123456789abc", strings.Repeat("z", MaxPushKeyLen)} {
		if err := ValidatePushKey(k); err != nil {
			t.Errorf("ValidatePushKey(%q) = %v, want nil", k, err)
		}
	}
	for k, want := range map[string]string{
		"":                                      "it is empty",
		strings.Repeat("z", MaxPushKeyLen+1):    "it is 65 bytes long",
		"a b":                                   "byte 2 is ' '",
		"a/b":                                   "byte 2 is '/'",
		"caf\u00e9":                             "byte 4",
		"k\n":                                   "byte 2",
		"{\"json\":1}":                          "byte 1",
		"uuid:0b6f7e2c-1d2a-4c3b-9e8f-12345678": "byte 5 is ':'",
	} {
		err := ValidatePushKey(k)
		if !errors.Is(err, ErrInvalidPushKey) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "A-Z a-z 0-9 . _ -") {
			t.Errorf("ValidatePushKey(%q) = %v, want ErrInvalidPushKey containing %q and the grammar", k, err, want)
		}
	}
}

// TestPushOnce checks the state side of idempotent pushes: a key is recorded
// with its push, the same key again changes nothing even after the IDs were
// taken again (where a plain push would recycle them a second time), refused
// pushes record nothing, and the cap drops the oldest keys first.
func TestPushOnce(t *testing.T) {
	s := State{Name: "orders", Start: 1, Next: 100, Ceiling: 200, End: 1000}
	cached := s
	already, err := s.PushOnce(Ranges{{5, 6}}, "k1")
	if err != nil || already {
		t.Fatalf("first PushOnce = %v, %v; want applied", already, err)
	}
	if !slices.Equal(s.Recycled, Ranges{{5, 6}}) || !slices.Equal(s.Pushed, []string{"k1"}) {
		t.Fatalf("after PushOnce: recycled %v pushed %v", s.Recycled, s.Pushed)
	}
	// Another worker takes the recycled IDs.
	if got, err := s.Take(2); err != nil || !slices.Equal(got, Ranges{{5, 6}}) {
		t.Fatalf("Take(2) = %v, %v; want the recycled 5:6", got, err)
	}
	// The retry: already applied, nothing changes.
	before := s
	already, err = s.PushOnce(Ranges{{5, 6}}, "k1")
	if err != nil || !already {
		t.Fatalf("retry = %v, %v; want already applied", already, err)
	}
	if !reflect.DeepEqual(s, before) || s.Recycled.Contains(5) {
		t.Fatalf("the retry changed the state: %+v", s)
	}
	// Without the key the same retry is accepted: that is the duplicate.
	dup := s
	if err := dup.Push(Ranges{{5, 6}}); err != nil || !dup.Recycled.Contains(5) {
		t.Fatalf("plain re-push = %v; the scenario needs it accepted", err)
	}
	// A refused push records nothing.
	before = s
	if _, err := s.PushOnce(Ranges{{150, 150}}, "k2"); !errors.Is(err, ErrBadPush) || !reflect.DeepEqual(s, before) {
		t.Fatalf("PushOnce of an ID never issued = %v, state %+v; want ErrBadPush and no change", err, s)
	}
	if _, err := s.PushOnce(Ranges{{7, 7}}, "bad key"); !errors.Is(err, ErrInvalidPushKey) || !reflect.DeepEqual(s, before) {
		t.Fatalf("PushOnce with a bad key = %v; want ErrInvalidPushKey and no change", err)
	}
	if already, err := s.PushOnce(nil, "k3"); err != nil || already || !reflect.DeepEqual(s, before) {
		t.Fatalf("empty PushOnce = %v, %v; want nothing done", already, err)
	}
	for _, f := range []State{{Name: "old", Legacy: true, Next: 10}, {Name: "new", Registered: true, Start: 1, End: MaxID}} {
		if _, err := f.PushOnce(Ranges{{1, 2}}, "k"); !errors.Is(err, ErrBadPush) || len(f.Pushed) != 0 {
			t.Errorf("%s: PushOnce = %v, pushed %v; want ErrBadPush and no key", f.Name, err, f.Pushed)
		}
	}
	if len(cached.Pushed) != 0 {
		t.Errorf("a copy made before changed: %v", cached.Pushed)
	}

	// The cap: MaxPushKeys+1 keyed pushes of single IDs drop the first key.
	s = State{Name: "orders", Start: 1, Next: 1000, Ceiling: 1000, End: 1000}
	for i := range int64(MaxPushKeys + 1) {
		copyBefore := s
		keysBefore := slices.Clone(s.Pushed)
		if _, err := s.PushOnce(Ranges{{2*i + 1, 2*i + 1}}, fmt.Sprintf("key-%d", i)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(copyBefore.Pushed, keysBefore) {
			t.Fatalf("push %d wrote into the backing array of a copy's keys", i)
		}
	}
	if len(s.Pushed) != MaxPushKeys || s.Pushed[0] != "key-1" || s.Pushed[MaxPushKeys-1] != fmt.Sprintf("key-%d", MaxPushKeys) {
		t.Fatalf("after %d keyed pushes: %d keys, first %q last %q; want %d, key-1 .. key-%d",
			MaxPushKeys+1, len(s.Pushed), s.Pushed[0], s.Pushed[len(s.Pushed)-1], MaxPushKeys, MaxPushKeys)
	}
	if already, err := s.PushOnce(Ranges{{3, 3}}, "key-1"); err != nil || !already {
		t.Errorf("key-1 (kept) = %v, %v; want already applied", already, err)
	}
	// key-0 was dropped: its retry is pushed again, and the overlap check
	// refuses it while its ID is still recycled.
	if _, err := s.PushOnce(Ranges{{1, 1}}, "key-0"); !errors.Is(err, ErrBadPush) || !strings.Contains(err.Error(), "overlaps recycled") {
		t.Errorf("evicted key-0 = %v; want refused as overlapping the recycled list", err)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	again, err := ParseState(s.Name, s.Encode())
	if err != nil || !reflect.DeepEqual(again, s) {
		t.Errorf("round trip = %+v, %v", again, err)
	}
}

// TestEncodedSizeBound computes the largest state the format allows and
// checks it stays far below ZooKeeper's 1 MB znode limit.
func TestEncodedSizeBound(t *testing.T) {
	s := State{
		Name:    "worst",
		Start:   1e18, // every number 19 digits long
		Next:    MaxID,
		Ceiling: MaxID,
		End:     MaxID,
		Windows: MaxWindows,
		Leaked:  MaxID,
		ZKEpoch: 1<<32 - 1,
		Marker:  "h-0123456789abcdef",
		Pushed:  capKeys(MaxPushKeys, MaxPushKeyLen),
	}
	for i := range int64(MaxRecycledRanges) {
		lo := int64(1e18) + 1e12*i
		s.Recycled = append(s.Recycled, Range{lo, lo + 1e11})
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	enc := s.Encode()
	if len(enc) >= 64<<10 {
		t.Errorf("worst-case encoded state is %d bytes, want < 64 KiB; lower MaxRecycledRanges", len(enc))
	}
	if _, err := ParseState(s.Name, enc); err != nil {
		t.Error(err)
	}
	t.Logf("worst-case encoded state: %d bytes", len(enc))
}

func TestErrorMessageShape(t *testing.T) {
	_, err := ParseState("orders", stateText(formatHeader, "start 1", "next 10", "ceiling 5", "end 100"))
	want := `sequence "orders": corrupt state: line 4: ceiling 5 is below next-1 (9): IDs up to 9 were issued above the durable ceiling`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

var benchState = State{
	Name: "orders", Start: 1, Next: 123456789, Ceiling: 123556789, End: MaxID, Windows: 4,
	Recycled: Ranges{{1000, 1099}, {5000, 5000}, {77777, 78000}, {123000000, 123000999}},
	Leaked:   12,
}

func BenchmarkParseState(b *testing.B) {
	data := benchState.Encode()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseState("orders", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	for b.Loop() {
		_ = benchState.Encode()
	}
}

func BenchmarkTakePush(b *testing.B) {
	s := benchState
	var ids int64
	for b.Loop() {
		got, err := s.Take(100)
		if err != nil {
			b.Fatal(err)
		}
		ids += got.Count()
		if err := s.Push(got[:1]); err != nil {
			b.Fatal(fmt.Errorf("push %v: %w", got[:1], err))
		}
		if s.Available() < 100 {
			s.Ceiling = min(s.End, s.Ceiling+1e6)
		}
	}
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
}
