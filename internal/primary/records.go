package primary

import "github.com/seqkeeper/seqkeeper/persist"

// stored is what the primary keeps of a sequence's record in the store:
// what its decisions and restores read. It leaves out what the store sets
// on every write (the writer's epoch and the time) and the znode's
// modification zxid and version (a restore re-creates the znode): 40 bytes
// instead of persist.Record's 136, one per stored sequence.
type stored struct {
	ceiling, czxid, start, end int64
	windows                    int32
	legacy, deleted            bool
}

// storedOf is what the primary keeps of r.
func storedOf(r persist.Record) stored {
	return stored{ceiling: r.Ceiling, czxid: r.Czxid, start: r.Start, end: r.End,
		windows: int32(r.Windows), legacy: r.Legacy, deleted: r.Deleted}
}

// record is s as the store's record of name (Epoch and Updated zero: the
// store sets them when it writes one).
func (s stored) record(name string) persist.Record {
	return persist.Record{Name: name, Ceiling: s.ceiling, Czxid: s.czxid, Start: s.start, End: s.end,
		Windows: int(s.windows), Legacy: s.legacy, Deleted: s.deleted}
}
