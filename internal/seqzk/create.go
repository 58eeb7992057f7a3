package seqzk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

var (
	// ErrInvalidSettings reports settings no sequence can have (a negative
	// start, a max below the start, too many windows). Nothing was
	// changed.
	ErrInvalidSettings = errors.New("invalid sequence settings")
	// ErrOtherSettings reports a create of a name that exists with other
	// settings. It matches ErrExists too. Nothing was changed.
	ErrOtherSettings = fmt.Errorf("%w with other settings", ErrExists)
)

// Check returns an error matching ErrInvalidSettings when r asks for
// settings no sequence can have; field names the settings as the caller's
// user knows them (a flag "--start", a JSON field "start", a Go field
// "Start").
func (r Registration) Check(field func(string) string) error {
	start := max(r.Start, state.DefaultStart)
	switch {
	case r.Start < 0:
		return fmt.Errorf("%w: %s %d: IDs start at 1 or above", ErrInvalidSettings, field("start"), r.Start)
	case r.End < 0 || (r.End != 0 && r.End < start):
		return fmt.Errorf("%w: %s %d: must be at least the start (%d)", ErrInvalidSettings, field("max"), r.End, start)
	case r.Windows < 0 || r.Windows > state.MaxWindows:
		return fmt.Errorf("%w: %s %d: want 0 to %d", ErrInvalidSettings, field("windows"), r.Windows, state.MaxWindows)
	}
	return nil
}

// Resolved returns r with its defaults filled in: the start and end the
// sequence gets.
func (r Registration) Resolved() Registration {
	if r.Start == 0 {
		r.Start = state.DefaultStart
	}
	if r.End == 0 {
		r.End = state.MaxID
	}
	return r
}

// Create registers sequence name with settings r (the primary initialises
// it), creating the root when it is missing. A sequence that exists with
// the same settings is not an error: created is false. One that exists
// with other settings is ErrOtherSettings, saying how they differ. A name
// deleted before is born above its tombstone (see Register).
func (o Operator) Create(ctx context.Context, name string, r Registration) (created bool, err error) {
	c := o.c
	if err := r.Check(func(s string) string { return s }); err != nil {
		return false, err
	}
	if err := c.ensureRoot(ctx); err != nil {
		return false, err
	}
	err = c.Register(ctx, name, r)
	if !errors.Is(err, ErrExists) {
		return err == nil, err
	}
	return false, c.sameSettings(ctx, name, r.Resolved())
}

// sameSettings returns nil when sequence name exists with the settings r,
// else an error matching ErrOtherSettings that says how it differs.
func (c *Client) sameSettings(ctx context.Context, name string, r Registration) error {
	st, _, err := c.Describe(ctx, name)
	if err != nil {
		return err
	}
	if st.Legacy {
		return fmt.Errorf("sequence %q %w: it is a legacy counter", name, ErrOtherSettings)
	}
	var diff []string
	if st.Start != r.Start {
		diff = append(diff, fmt.Sprintf("start %d (asked %d)", st.Start, r.Start))
	}
	if st.End != r.End {
		diff = append(diff, fmt.Sprintf("max %d (asked %d)", st.End, r.End))
	}
	if st.Windows != r.Windows {
		diff = append(diff, fmt.Sprintf("windows %d (asked %d)", st.Windows, r.Windows))
	}
	if len(diff) > 0 {
		return fmt.Errorf("sequence %q %w: %s", name, ErrOtherSettings, strings.Join(diff, ", "))
	}
	return nil
}
