// Package seqzk reads and writes sequence znodes in ZooKeeper with every
// power: the workers' take and push, and the writes only the primary and
// operators may make (Register, Raise, RaiseAll, Revalidate, Restamp,
// Rotate, OpenWindow, PruneWindows, TopUpWindows, Restore). A take from a
// sequence with window slots also carves the slot's next window when the
// current one runs low (windows.go); the primary's TopUpWindows only opens
// windows for slots left empty. Package sequence, the public worker
// library, exposes the first kind only; the primary (internal/primary) and
// the operator commands use this package directly.
//
// Every write of a validated state is a compare-and-set that first checks
// the state's marker znode (see state.State.Marker); the caching rules and
// the reasons for them are in package sequence's documentation.
package seqzk
