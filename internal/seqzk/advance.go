package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// ErrAdvanceRefused reports an advance that would break the sequence:
// past the end of its space, on an exhausted, legacy or uninitialised
// sequence. Nothing was changed.
var ErrAdvanceRefused = errors.New("advance refused")

// Advance moves sequence name forward for an operator so that, from now
// on, it hands out no ID below to: next moves up to to (never down), and
// the recycled IDs and open windows are dropped with a fresh marker, as
// FastForward does (their IDs lie below next and could be below to). The
// ceiling rises to ceiling, which the durable store must already hold.
// Takes racing it either land before it, or fail their compare-and-set and
// read the advanced state.
//
// It returns the state it replaced (to tell which IDs were skipped) and
// the state it wrote. It refuses, with ErrAdvanceRefused and nothing
// written, a legacy counter, a registration the primary has not
// initialised, an exhausted sequence, and a to beyond the end of the
// space.
func (c *Client) Advance(ctx context.Context, name string, to, ceiling int64) (replaced, advanced state.State, err error) {
	return c.revalidate(ctx, name, to, ceiling, true, func(st state.State) error {
		return CheckAdvance(st, to)
	})
}

// CheckAdvance returns why sequence state st cannot be advanced to to
// (wrapping ErrAdvanceRefused), or nil.
func CheckAdvance(st state.State, to int64) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s", st.Name, ErrAdvanceRefused, fmt.Sprintf(format, args...))
	}
	last := min(st.End, state.MaxID-1) // see state.MaxID
	switch {
	case st.Legacy:
		return refuse("it is a legacy 8-byte counter; advance works on sequences with a ceiling")
	case st.Registered:
		return refuse("it is not initialised yet; start 'seqkeeper serve' (the primary initialises it) and advance it then")
	case st.Next > last:
		return refuse("it is exhausted (its space %d:%d is used up)", st.Start, st.End)
	case to > last:
		return refuse("%d is beyond the last ID of its space (%d): nothing could be handed out after it; create a sequence with a wider space instead", to, last)
	}
	return nil
}
