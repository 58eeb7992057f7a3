// Package state is the text format of a sequence znode and the pure rules
// for changing it: parse, validate, encode, take and push. It does no I/O;
// package sequence (the workers' client) and the primary both read and
// write ZooKeeper through it, so there is one definition of what a valid
// state is and of what may be handed out.
package state

import (
	"errors"
	"fmt"
	"math"
	"strings"
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
	// new epoch. 0 means never validated: with a Marker, a new incarnation
	// the primary has initialised and stamps only once its store holds the
	// birth, so that no ID is handed out of a sequence a ZooKeeper loss
	// would not restore.
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
	// again). They are lost instead. 0: no floor. It is also the floor of
	// the incarnation (the Live the store records of it): a name created
	// again after its whole space went out is born used up, next at
	// end+1 and its floor above every ID of every earlier incarnation,
	// which only PushFloor can then hold (above next).
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

// VersionLimit is the highest znode data version a client writes at.
// ZooKeeper keeps the version in an int32 that wraps, and an expected
// version of -1 makes a write unconditional (ZOOKEEPER-4743), so a client
// never writes at a version at or above this limit, or below 0: it waits
// for the primary to rotate the sequence onto a fresh znode (see
// config.Primary.RotateVersion, far below this limit).
const VersionLimit int32 = math.MaxInt32 - 1<<20

// WindowPrefix starts the name of every window znode under a sequence
// znode; ZooKeeper appends a 10-digit sequence number.
const WindowPrefix = "w-"

// validMarker reports whether m is a marker name: MarkerPrefix and 16
// lowercase hex digits.
func validMarker(m string) bool {
	hex, ok := strings.CutPrefix(m, MarkerPrefix)
	return ok && len(hex) == 16 && strings.Trim(hex, "0123456789abcdef") == ""
}

// Validated reports whether s carries a complete validation stamp (an epoch
// and a marker). Clients hand out IDs only from validated states.
func (s State) Validated() bool { return s.ZKEpoch != 0 && s.Marker != "" }
