// Package admin creates and deletes sequences: the operations that the
// `seqkeeper create` and `seqkeeper delete` commands and the HTTP API's
// admin routes (POST /v1/sequences, DELETE /v1/sequences/{name}) share, so
// that both ask the same questions and give the same answers.
package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

var (
	// ErrInvalid reports settings no sequence can have (a negative start,
	// a max below the start, too many windows). Nothing was changed.
	ErrInvalid = errors.New("invalid sequence settings")
	// ErrOtherSettings reports a create of a name that exists with other
	// settings. It matches seqzk.ErrExists too. Nothing was changed.
	ErrOtherSettings = fmt.Errorf("%w with other settings", seqzk.ErrExists)
)

// Check returns an error matching ErrInvalid when r asks for settings no
// sequence can have; field names the settings as the caller's user knows
// them (a flag "--start" or a JSON field "start").
func Check(r seqzk.Registration, field func(string) string) error {
	start := max(r.Start, state.DefaultStart)
	switch {
	case r.Start < 0:
		return fmt.Errorf("%w: %s %d: IDs start at 1 or above", ErrInvalid, field("start"), r.Start)
	case r.End < 0 || (r.End != 0 && r.End < start):
		return fmt.Errorf("%w: %s %d: must be at least the start (%d)", ErrInvalid, field("max"), r.End, start)
	case r.Windows < 0 || r.Windows > state.MaxWindows:
		return fmt.Errorf("%w: %s %d: want 0 to %d", ErrInvalid, field("windows"), r.Windows, state.MaxWindows)
	}
	return nil
}

// Resolved returns r with its defaults filled in: the start and end the
// sequence gets.
func Resolved(r seqzk.Registration) seqzk.Registration {
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
// with other settings is ErrOtherSettings, saying how they differ.
func Create(ctx context.Context, zc *zkclient.Client, seqs *seqzk.Client, name string, r seqzk.Registration) (created bool, err error) {
	if err := Check(r, func(s string) string { return s }); err != nil {
		return false, err
	}
	if err := zc.EnsurePath(ctx, seqs.Root()); err != nil {
		return false, fmt.Errorf("create the root %s: %w", seqs.Root(), err)
	}
	err = seqs.Register(ctx, name, r)
	if !errors.Is(err, seqzk.ErrExists) {
		return err == nil, err
	}
	return false, sameSettings(ctx, seqs, name, Resolved(r))
}

// sameSettings returns nil when sequence name exists with the settings r,
// else an error matching ErrOtherSettings that says how it differs.
func sameSettings(ctx context.Context, seqs *seqzk.Client, name string, r seqzk.Registration) error {
	st, _, err := seqs.Describe(ctx, name)
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

// Service carries out creates and deletes for the HTTP API's admin routes
// (it implements httpapi.Admin).
type Service struct {
	ZooKeeper *zkclient.Client
	Sequences *seqzk.Client
	// Store receives the tombstone of a deleted sequence before its znode
	// goes.
	Store *persist.Store
}

// Create registers a sequence; see the package function Create.
func (s *Service) Create(ctx context.Context, name string, r seqzk.Registration) (bool, error) {
	return Create(ctx, s.ZooKeeper, s.Sequences, name, r)
}

// Delete tombstones sequence name in the store, then removes it from
// ZooKeeper (primary.Delete), and returns the tombstone's ceiling.
func (s *Service) Delete(ctx context.Context, name string) (int64, error) {
	return primary.Delete(ctx, s.Sequences, s.Store, name)
}
