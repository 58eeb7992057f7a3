// Package sequence is the workers' library: it hands out unique integer IDs
// from named sequences kept in ZooKeeper (Client.Take, Client.Push,
// Client.Describe, and an Allocator for one ID at a time). The text format
// of a sequence znode is package state; the writes only the primary may
// make (raising ceilings, validating, rotating, restoring) are not part of
// this package, so that no worker can break the promise that no ID is
// handed out twice.
//
// # State format
//
// A sequence znode holds a small, versioned text that an operator can read in
// zkCli:
//
//	seqkeeper-sequence v1
//	start 1
//	next 1001
//	ceiling 5000
//	end 9223372036854775807
//	windows 4
//	recycled 10:20 30 40:45
//	leaked 7
//	zkepoch 3
//	marker h-0123456789abcdef
//	pushfloor 1001
//	pushed 0b6f7e2c-1d2a-4c3b-9e8f-123456789abc
//
// next is the lowest ID never issued; ceiling is the highest ID clients may
// issue, raised by the primary only after the durable store holds it;
// recycled lists IDs pushed back, reused lowest first; zkepoch is the
// ZooKeeper epoch in which the primary last validated the state, and marker
// the child znode created with that stamp, which every write of the state
// checks (see State.Marker); pushfloor is next as it was at that stamp
// (keyed pushes of IDs below it are refused, see State.PushFloor);
// pushed lists the idempotency keys of the latest keyed pushes
// (Client.PushOnce, at most state.MaxPushKeys). An operator registers a
// sequence by creating its znode empty or holding a start value; the primary
// initialises it. See state.ParseState for every accepted form and State.Validate
// for the invariants.
//
// # Taking and returning IDs
//
// Client.Take hands out a batch of IDs by compare-and-set on the znode
// version: recycled IDs first (oldest holes first), then fresh IDs from next
// up to the ceiling. The client caches each sequence's state and version, so
// an uncontended take is one ZooKeeper write; after losing a race
// (BadVersion) it re-reads and tries again. At the ceiling it waits for the
// primary to raise it (Options.CeilingWait), then fails with
// ErrCeilingReached. Client.Push returns unused IDs; it refuses anything
// that could hand an ID out twice. An Allocator serves single IDs from
// memory and refills in the background.
//
// A write whose reply is lost (connection loss) is never assumed to have
// failed: Take starts again from a fresh read, so those IDs are lost, not
// reused; Push does not retry at all and reports ErrUncertain. PushOnce
// records an idempotency key with the push, so it can retry: the fresh read
// shows the key if the lost write was applied.
//
// # The cached-version trap
//
// A znode deleted and created again restarts its version at 0, so a write
// made with a version cached from the old znode could land on the new one
// with stale data. A cached state is therefore used only while the session
// that read it is still the session and a watch set when it was read has not
// fired. The watch is a child watch on the sequence znode, not a data watch:
// it fires when the znode is deleted (and when its windows change) but not on
// data changes, so the client's own writes keep its cache valid and a take
// stays one round trip; other writers' changes show up as BadVersion. One
// window remains: a delete and re-create that completes while the client's
// write is already on the wire, and brings the new znode to exactly the
// cached version. A write of a validated state cannot land there: it first
// checks the state's marker znode, which died with the old znode. For the
// other states every write checks the creation zxid ZooKeeper returns; if
// such a write ever lands, the client hands out nothing and returns
// ErrRecreated, and the primary (which sees a creation zxid it did not
// record) fast-forwards the sequence past the stored ceiling.
//
// # Windows
//
// A sequence registered with windows has child znodes (w-0000000001, ...)
// each holding a disjoint range carved below the durable ceiling by the
// primary. Clients start at a random window and move on
// when it is used up, so many clients stop fighting over one znode version.
// The price is order: IDs stay unique, but IDs handed out later may be lower
// than IDs handed out earlier, from another window. Recycled IDs go back to
// the sequence znode and are handed out from there first.
//
// # What is not guaranteed
//
// Legacy sequences, whose znode holds a bare 8-byte big-endian counter, have
// no ceiling: workers increment the counter directly and the primary can
// only persist a reserve-ahead mark after it sees the counter move. IDs
// taken faster than it reacts are not covered by the store, so a ZooKeeper
// data loss in that moment can reissue them. Legacy counters must also stay
// at or below state.MaxLegacyCounter (2^61-1) to be told apart from the text form.
//
// The recycled list is capped at state.MaxRecycledRanges ranges to keep the znode
// small. Past the cap the smallest ranges are dropped and counted in the
// leaked field: IDs are leaked, never handed out twice.
package sequence
