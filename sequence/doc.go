// Package sequence hands out unique integer IDs from named sequences kept in
// ZooKeeper, and defines the state each sequence znode holds.
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
//
// next is the lowest ID never issued; ceiling is the highest ID clients may
// issue, raised by the primary only after the durable store holds it;
// recycled lists IDs pushed back, reused lowest first. An operator registers a
// sequence by creating its znode empty or holding a start value; the primary
// initialises it. See ParseState for every accepted form and State.Validate
// for the invariants.
//
// # What is not guaranteed
//
// Legacy sequences, whose znode holds a bare 8-byte big-endian counter, have
// no ceiling: workers increment the counter directly and the primary can
// only persist a reserve-ahead mark after it sees the counter move. IDs
// taken faster than it reacts are not covered by the store, so a ZooKeeper
// data loss in that moment can reissue them. Legacy counters must also stay
// at or below MaxLegacyCounter (2^61-1) to be told apart from the text form.
//
// The recycled list is capped at MaxRecycledRanges ranges to keep the znode
// small. Past the cap the smallest ranges are dropped and counted in the
// leaked field: IDs are leaked, never handed out twice.
package sequence
