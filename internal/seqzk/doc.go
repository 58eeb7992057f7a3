// Package seqzk reads and writes sequence znodes in ZooKeeper with every
// power, each a handle on one Client (powers.go): the Client takes and
// pushes, as a worker; Client.Keeper holds the primary's writes (raises,
// stamps, windows, rotation, restore, the lifecycle protocol);
// Client.Meta the root's records (eras, tombstones); Client.Operator the
// operator's (create, delete, the ACL layout, claims). A take from a
// sequence with window slots also carves the slot's next window when the
// current one runs low (windows.go); the primary's TopUpWindows only opens
// windows for slots left empty. Package sequence, the public worker
// library, exposes the worker's power and the operator's create and
// delete; the primary (internal/primary) and the operator commands use
// this package directly.
//
// Every write of a validated state is a compare-and-set that first checks
// the state's marker znode (see state.State.Marker); the caching rules and
// the reasons for them are in package sequence's documentation.
package seqzk
