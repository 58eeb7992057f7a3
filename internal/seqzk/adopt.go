package seqzk

import (
	"errors"
	"fmt"
)

// ErrNotLegacy reports an adoption of a sequence that is in the state
// format already (or a registration): there is nothing to adopt.
var ErrNotLegacy = errors.New("not a legacy counter")

// FormatCurator is the counter format Adopt understands: Apache
// Curator's DistributedAtomicLong (and seqkeeper's own legacy sequences),
// 8 bytes, big-endian. (kazoo's Counter writes decimal text, which
// seqkeeper reads as a registration starting at that number: see
// docs/migrate.md.)
const FormatCurator = "curator 8-byte"

// LegacyCounter is a counter of another library at a sequence's path, as
// an adoption read it.
type LegacyCounter struct {
	// Value is the counter: the highest ID it may have handed out
	// (Curator's increment and kazoo's += return the new value).
	Value int64
	// Format is FormatCurator.
	Format string
	// Version is the znode's data version when it was read.
	Version int32
}

// Legacy returns the legacy counter held in h, for an adoption: a
// sequence in the state format, or a registration, is ErrNotLegacy.
func Legacy(h Holding) (LegacyCounter, error) {
	st := h.State
	switch {
	case !h.Exists:
		return LegacyCounter{}, h.Missing()
	case st.Legacy:
		return LegacyCounter{Value: st.Next, Format: FormatCurator, Version: h.Version}, nil
	case st.Registered:
		return LegacyCounter{}, fmt.Errorf("sequence %q: %w: it is a registration starting at %d (a kazoo counter's decimal text reads as one: see docs/migrate.md)", h.Name, ErrNotLegacy, st.Start)
	}
	return LegacyCounter{}, fmt.Errorf("sequence %q: %w: it is in seqkeeper's state format already", h.Name, ErrNotLegacy)
}
