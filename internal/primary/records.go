package primary

import "github.com/seqkeeper/seqkeeper/persist"

// stored is what the primary keeps of a sequence's record in the store:
// what its decisions read. 24 bytes instead of persist.Record's 136, one
// per stored sequence: it leaves out what the store sets on every write
// (the writer's epoch and the time), the znode's modification zxid and
// version, and the configuration (start, end, windows, legacy), which a
// live sequence's state holds and a restore reads again from the store
// (restore.go).
type stored struct {
	ceiling, czxid int64
	deleted        bool
}

// storedOf is what the primary keeps of r.
func storedOf(r persist.Record) stored {
	return stored{ceiling: r.Ceiling, czxid: r.Czxid, deleted: r.Deleted}
}

// record is s as the store's record of name, as far as s knows it: no
// configuration, Epoch and Updated zero.
func (s stored) record(name string) persist.Record {
	return persist.Record{Name: name, Ceiling: s.ceiling, Czxid: s.czxid, Deleted: s.deleted}
}
