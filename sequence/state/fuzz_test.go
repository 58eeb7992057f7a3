package state

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

func FuzzParseState(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		[]byte("1000"),
		[]byte(" 42\n"),
		legacyData(0),
		legacyData(123456),
		legacyData(1<<61 - 1),
		legacyData(1 << 63),
		stateText(formatHeader, "start 1"),
		stateText(formatHeader, "start 5", "end 100", "windows 3"),
		stateText("start 5", "windows 2"),
		stateText(formatHeader, "start 1", "next 1001", "ceiling 5000", "end 9223372036854775807", "windows 4", "recycled 10:20 30 40:45", "leaked 7"),
		stateText(formatHeader, "start 1", "next 1", "ceiling 0", "end 10"),
		stateText(formatHeader, "start 1", "next 11", "ceiling 10", "end 10", "recycled 1:3 5 7:10"),
		stateText(formatHeader, "start 1", "next 9223372036854775807", "ceiling 9223372036854775807", "end 9223372036854775807", "recycled 9223372036854775806"),
		[]byte(formatHeader + "\r\nstart 1\r\nnext 2\r\nceiling 2\r\nend 2\r\nrecycled 1\r\n"),
		stateText("seqkeeper-sequence v2", "start 1"),
		stateText(formatHeader, "start 1", "next 10", "ceiling 5", "end 100"),
		stateText(formatHeader, "start 1", "next 10", "ceiling 20", "end 100", "recycled 1:2 3"),
		stateText(formatHeader, "start 007"),
		stateText(formatHeader, "start 1", "next 10", "ceiling 20", "end 100", "recycled 3", "zkepoch 2", "marker h-00112233445566aa", "pushed 0b6f7e2c-1d2a-4c3b-9e8f-123456789abc k.2 K_3"),
		stateText(formatHeader, "start 1", "next 10", "ceiling 20", "end 100", "pushed a a"),
		stateText(formatHeader, "start 1", "next 10", "ceiling 20", "end 100", "pushed"),
		stateText("start 1", "pushed k"),
	} {
		fuzztest.Add(f, seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseState("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), `sequence "fuzz": corrupt state: `) {
				t.Fatalf("error %q does not wrap ErrCorrupt with the sequence name", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseState accepted %q, but Validate: %v", data, err)
		}
		enc := s.Encode()
		again, err := ParseState("fuzz", enc)
		if err != nil {
			t.Fatalf("ParseState(%q) = %+v; its encoding %q does not parse: %v", data, s, enc, err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("ParseState(%q) = %+v, but after Encode and ParseState %+v", data, s, again)
		}
		if enc2 := again.Encode(); !bytes.Equal(enc2, enc) {
			t.Fatalf("Encode is not canonical: %q then %q", enc, enc2)
		}
	})
}

// opReader hands out the fuzzer's bytes one by one, then zeros.
type opReader []byte

func (r *opReader) next() int64 {
	if len(*r) == 0 {
		return 0
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return int64(b)
}

// FuzzTakePush drives a state through random takes, pushes and ceiling raises
// as clients and the primary would, and checks after every step that no ID
// held by a client is handed out again, that no ID above the ceiling is
// issued, that every issued ID is accounted for (held, recycled or leaked),
// that refused pushes change nothing, and that the state stays valid and
// survives an Encode/ParseState round trip. Some pushes carry an idempotency
// key: repeating one must change nothing.
func FuzzTakePush(f *testing.F) {
	fuzztest.Add(f, int64(1), int64(100), uint8(0), []byte{0, 10, 3, 50, 0, 20, 1, 0, 0, 5, 2, 3, 1, 0, 0, 40})
	fuzztest.Add(f, int64(1000), int64(5000), uint8(1), []byte{3, 255, 0, 200, 0, 200, 1, 2, 0, 1, 7, 1, 1, 0, 3, 0, 0, 255})
	fuzztest.Add(f, int64(1), int64(50), uint8(2), []byte{3, 255, 0, 10, 1, 0, 0, 0, 1, 1, 0, 0, 0, 255, 0, 255})
	fuzztest.Add(f, int64(7), int64(30), uint8(4), []byte{3, 9, 0, 30, 1, 0, 2, 1, 1, 0, 4, 1, 1, 0, 6, 1, 1, 0, 8, 1, 0, 3, 2, 0, 5})
	fuzztest.Add(f, int64(5), int64(20), uint8(8), []byte{0, 5, 3, 255, 0, 255, 0, 1})
	fuzztest.Add(f, int64(40), int64(1000), uint8(16), []byte{0, 200, 1, 2, 7, 9, 9, 9, 1, 1, 3, 4, 2, 0, 0, 2, 1, 1, 2, 50, 3})
	f.Fuzz(func(t *testing.T, start, size int64, mode uint8, ops []byte) {
		if len(ops) > 1024 {
			ops = ops[:1024]
		}
		size = 1 + fuzzAbs(size)%5000
		s := State{Name: "fuzz", Start: 1 + fuzzAbs(start)%1_000_000}
		switch {
		case mode&8 != 0: // a legacy counter
			s = State{Name: "fuzz", Legacy: true, Start: 1, Next: s.Start - 1, Ceiling: MaxLegacyCounter, End: MaxLegacyCounter}
			if mode&2 != 0 {
				s.Next = MaxLegacyCounter - size
			}
		case mode&2 != 0: // at the top of int64, where End+1 overflows
			s.Start, s.End = MaxID-size+1, MaxID
		default:
			s.End = s.Start + size - 1
		}
		if !s.Legacy {
			s.Next, s.Ceiling = s.Start, s.Start-1
		}
		limit := MaxRecycledRanges
		if mode&4 != 0 {
			limit = 1 + int(mode>>5) // 1..8, to reach the cap policy
		}
		origin := s.Next
		var held []Range // IDs handed out and not pushed back
		keys := 0        // keyed pushes so far, naming the next key
		r := opReader(ops)
		for len(r) > 0 {
			before := s
			switch r.next() % 4 {
			case 0:
				fuzzTake(t, &s, before, 1+r.next()*r.next()/4, &held)
			case 1:
				fuzzPushHeld(t, &s, before, &r, &held, limit, &keys)
			case 2:
				fuzzPushBad(t, &s, before, &r, held, limit)
			case 3: // the primary raises the ceiling
				if !s.Legacy {
					s.Ceiling += min(s.End-s.Ceiling, 1+r.next()*r.next())
				}
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("after an operation: %v", err)
			}
			issued := s.Next - origin
			if accounted := Ranges(held).Count() + s.Recycled.Count() + s.Leaked; accounted != issued {
				t.Fatalf("%d IDs issued but %d accounted for (held %v, recycled %v, leaked %d)", issued, accounted, held, s.Recycled, s.Leaked)
			}
			again, err := ParseState(s.Name, s.Encode())
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("round trip of %+v gave %+v, %v", s, again, err)
			}
		}
	})
}

func fuzzTake(t *testing.T, s *State, before State, n int64, held *[]Range) {
	avail := s.Available()
	got, err := s.Take(n)
	if errors.Is(err, ErrExhausted) {
		if avail != 0 || !reflect.DeepEqual(*s, before) {
			t.Fatalf("Take(%d) exhausted with %d available, or changed the state", n, avail)
		}
		return
	}
	if err != nil {
		t.Fatalf("Take(%d): %v", n, err)
	}
	if got.Count() != min(n, avail) {
		t.Fatalf("Take(%d) = %v with %d available", n, got, avail)
	}
	if msg := got.canonicalProblem(); msg != "" {
		t.Fatalf("Take(%d) = %v: %s", n, got, msg)
	}
	for _, g := range got {
		if h, ok := heldOverlap(*held, g); ok {
			t.Fatalf("Take(%d) = %v hands out IDs of %v again", n, got, h)
		}
		if !s.Legacy && (g.Start < s.Start || g.End >= s.Next || g.End >= before.Next && g.End > before.Ceiling) {
			t.Fatalf("Take(%d) = %v outside issued IDs or above ceiling %d (state before %+v)", n, got, before.Ceiling, before)
		}
	}
	*held = append(*held, got...)
	sortHeld(*held)
}

// heldOverlap returns a held range overlapping g. held is sorted and
// disjoint, so a binary search finds it: a linear scan made long fuzz inputs
// quadratic.
func heldOverlap(held []Range, g Range) (Range, bool) {
	i, _ := slices.BinarySearchFunc(held, g.Start, func(h Range, id int64) int { return cmp.Compare(h.End, id) })
	if i < len(held) && held[i].Start <= g.End {
		return held[i], true
	}
	return Range{}, false
}

func sortHeld(held []Range) {
	slices.SortFunc(held, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
}

// fuzzPushHeld pushes back parts of up to three held ranges, as a client
// returning unused IDs does; the push must be accepted.
func fuzzPushHeld(t *testing.T, s *State, before State, r *opReader, held *[]Range, limit int, keys *int) {
	if len(*held) == 0 {
		return
	}
	keyed := r.next()%2 == 1
	var push Ranges
	picked := map[int]bool{}
	for range 1 + r.next()%3 {
		i := int(r.next()*256+r.next()) % len(*held)
		if picked[i] {
			continue
		}
		picked[i] = true
		h := (*held)[i]
		lo := h.Start + (r.next()*r.next())%h.Len()
		hi := lo + (r.next()*r.next())%(h.End-lo+1)
		push = append(push, Range{lo, hi})
	}
	var err error
	key := fmt.Sprintf("k%d", *keys)
	if keyed {
		*keys++
		var already bool
		already, err = s.pushOnce(push, key, limit)
		if already {
			t.Fatalf("PushOnce(%v, %s) of a fresh key reports already applied", push, key)
		}
	} else {
		err = s.push(push, limit)
	}
	if s.Legacy {
		if !errors.Is(err, ErrBadPush) || !reflect.DeepEqual(*s, before) {
			t.Fatalf("Push(%v) to a legacy counter: %v", push, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Push(%v) of held IDs: %v", push, err)
	}
	if keyed {
		if n := len(s.Pushed); n == 0 || n > MaxPushKeys || s.Pushed[n-1] != key {
			t.Fatalf("after PushOnce with %s: keys %v", key, s.Pushed)
		}
		// The retry of an applied push changes nothing.
		retry := *s
		if already, err := retry.pushOnce(push, key, limit); err != nil || !already || !reflect.DeepEqual(retry, *s) {
			t.Fatalf("retry of PushOnce(%v, %s) = %v, %v; state %+v, want already applied and %+v", push, key, already, err, retry, *s)
		}
	}
	// The pushed IDs are no longer held.
	var rest []Range
	for i, h := range *held {
		if !picked[i] {
			rest = append(rest, h)
			continue
		}
		for _, p := range push {
			if p.Start >= h.Start && p.End <= h.End {
				if p.Start > h.Start {
					rest = append(rest, Range{h.Start, p.Start - 1})
				}
				if p.End < h.End {
					rest = append(rest, Range{p.End + 1, h.End})
				}
			}
		}
	}
	sortHeld(rest)
	*held = rest
}

// fuzzPushBad pushes a random range that no client holds. If it includes an
// ID never issued, outside the space or already recycled it must be refused
// and change nothing; a range of leaked IDs is left alone, as the state
// cannot tell those from held ones.
func fuzzPushBad(t *testing.T, s *State, before State, r *opReader, held []Range, limit int) {
	lo := s.Start - 2 + (r.next()*256+r.next())%(s.Next-s.Start+8)
	lo = min(lo, MaxID-8) // keep lo+7 from overflowing at the top of int64
	bad := Range{lo, lo + r.next()%8}
	if _, ok := heldOverlap(held, bad); ok {
		return
	}
	_, overlaps := heldOverlap(s.Recycled, bad)
	if !s.Legacy && !overlaps && bad.Start >= s.Start && bad.End < s.Next {
		return
	}
	if err := s.push(Ranges{bad}, limit); !errors.Is(err, ErrBadPush) || !reflect.DeepEqual(*s, before) {
		t.Fatalf("Push(%v) on %+v: error %v, state after %+v; want refused and unchanged", bad, before, err, *s)
	}
}

func fuzzAbs(v int64) int64 {
	if v < 0 {
		return -(v + 1) // no overflow at MinInt64
	}
	return v
}
