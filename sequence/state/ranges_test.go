package state

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRangeLen(t *testing.T) {
	tests := []struct {
		r    Range
		want int64
	}{
		{Range{1, 1}, 1},
		{Range{5, 9}, 5},
		{Range{1, math.MaxInt64}, math.MaxInt64},
		{Range{math.MaxInt64, math.MaxInt64}, 1},
		{Range{9, 5}, 0},
		// Not valid ranges of IDs, but Len must still not wrap.
		{Range{0, math.MaxInt64}, math.MaxInt64},
		{Range{math.MinInt64, math.MaxInt64}, math.MaxInt64},
		{Range{-1, math.MaxInt64 - 1}, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.r.Len(); got != tt.want {
			t.Errorf("Range%v.Len() = %d, want %d", tt.r, got, tt.want)
		}
	}
}

func TestRangeStringAndParse(t *testing.T) {
	tests := []struct {
		in   string
		want Range
		str  string // canonical spelling, if different from in
	}{
		{in: "1", want: Range{1, 1}},
		{in: "10:20", want: Range{10, 20}},
		{in: "5:5", want: Range{5, 5}, str: "5"},
		{in: "9223372036854775807", want: Range{math.MaxInt64, math.MaxInt64}},
		{in: "1:9223372036854775807", want: Range{1, math.MaxInt64}},
	}
	for _, tt := range tests {
		got, err := ParseRange(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		str := tt.str
		if str == "" {
			str = tt.in
		}
		if s := got.String(); s != str {
			t.Errorf("Range%v.String() = %q, want %q", got, s, str)
		}
	}
}

func TestParseRangeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "not a number"},
		{":", "not a number"},
		{"5:", "end"},
		{":5", "start"},
		{"0", "below 1"},
		{"0:5", "below 1"},
		{"-3:5", "below 1"},
		{"9:5", "above end"},
		{"007", "leading zero"},
		{"1:05", "leading zero"},
		{"+5", "not a plain base-10"},
		{"5 ", "not a plain base-10"},
		{"1:2:3", "not a plain base-10"},
		{"0x10", "not a plain base-10"},
		{"1_000", "not a plain base-10"},
		{"9223372036854775808", "does not fit"},
		{"1:99999999999999999999", "does not fit"},
	}
	for _, tt := range tests {
		_, err := ParseRange(tt.in)
		if err == nil {
			t.Errorf("ParseRange(%q) succeeded, want error containing %q", tt.in, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"`+tt.in+`"`) {
			t.Errorf("ParseRange(%q) error = %q, want it to name the input and contain %q", tt.in, err, tt.want)
		}
	}
}

func TestRangesCountContainsString(t *testing.T) {
	rs := Ranges{{2, 4}, {7, 7}, {10, 20}}
	if got := rs.Count(); got != 3+1+11 {
		t.Errorf("Count() = %d, want 15", got)
	}
	if got := rs.String(); got != "2:4 7 10:20" {
		t.Errorf("String() = %q", got)
	}
	for id := int64(0); id <= 22; id++ {
		want := id >= 2 && id <= 4 || id == 7 || id >= 10 && id <= 20
		if got := rs.Contains(id); got != want {
			t.Errorf("Contains(%d) = %v, want %v", id, got, want)
		}
	}
	if Ranges(nil).Contains(1) || Ranges(nil).Count() != 0 || Ranges(nil).String() != "" {
		t.Error("empty Ranges misbehaves")
	}
	huge := Ranges{{1, math.MaxInt64}, {1, 5}} // not canonical, but Count must not wrap
	if got := huge.Count(); got != math.MaxInt64 {
		t.Errorf("Count() of huge ranges = %d, want saturation at MaxInt64", got)
	}
}

func TestNormalizeRanges(t *testing.T) {
	tests := []struct {
		name string
		in   []Range
		want Ranges
	}{
		{"empty", nil, nil},
		{"single", []Range{{3, 5}}, Ranges{{3, 5}}},
		{"sorts", []Range{{10, 12}, {1, 2}, {5, 5}}, Ranges{{1, 2}, {5, 5}, {10, 12}}},
		{"coalesces adjacent", []Range{{6, 9}, {1, 2}, {3, 5}}, Ranges{{1, 9}}},
		{"coalesces singles", []Range{{3, 3}, {1, 1}, {2, 2}, {5, 5}}, Ranges{{1, 3}, {5, 5}}},
		{"top of the space", []Range{{math.MaxInt64, math.MaxInt64}, {1, math.MaxInt64 - 1}}, Ranges{{1, math.MaxInt64}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got, err := NormalizeRanges(in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("input modified: %v", in)
			}
			if msg := got.canonicalProblem(); msg != "" {
				t.Errorf("result not canonical: %s", msg)
			}
		})
	}
}

func TestNormalizeRangesErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []Range
		want string
	}{
		{"zero start", []Range{{0, 5}}, "below 1"},
		{"negative", []Range{{-5, -1}}, "below 1"},
		{"reversed", []Range{{5, 3}}, "above end"},
		{"duplicate", []Range{{5, 5}, {5, 5}}, "overlap"},
		{"overlap", []Range{{10, 20}, {1, 10}}, "ranges 1:10 and 10:20 overlap"},
		{"contained", []Range{{1, 100}, {50, 60}}, "overlap"},
		{"overlap after coalescing", []Range{{1, 5}, {6, 8}, {7, 9}}, "overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NormalizeRanges(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestCanonicalProblem(t *testing.T) {
	tests := []struct {
		rs   Ranges
		want string
	}{
		{Ranges{{1, 2}, {4, 4}}, ""},
		{Ranges{{4, 4}, {1, 2}}, "ascending"},
		{Ranges{{1, 5}, {5, 6}}, "overlap"},
		{Ranges{{1, 5}, {6, 6}}, "write them as one range 1:6"},
		{Ranges{{1, 5}, {1, 6}}, "ascending"},
		{Ranges{{0, 5}}, "below 1"},
	}
	for _, tt := range tests {
		got := tt.rs.canonicalProblem()
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%v: canonicalProblem() = %q, want %q", tt.rs, got, tt.want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	ok := map[string]int64{"0": 0, "1": 1, "-1": -1, "9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64}
	for in, want := range ok {
		if got, err := parseNumber(in); err != nil || got != want {
			t.Errorf("parseNumber(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "-0", "00", "01", "+1", " 1", "1 ", "1e3", "١", "9223372036854775808", "--1"} {
		if got, err := parseNumber(in); err == nil {
			t.Errorf("parseNumber(%q) = %d, want error", in, got)
		}
	}
}
