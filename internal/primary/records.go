package primary

import "github.com/seqkeeper/seqkeeper/persist"

// stored is what the primary keeps of a sequence's record in the store:
// what its decisions read. 24 bytes instead of persist.Record's 160, one
// per stored sequence: it leaves out what the store sets on every write
// (the writer's epoch and the time), the znode's modification zxid and
// version, the incarnation and era, and the configuration (start, end,
// windows, legacy), which a live sequence's state holds and a restore
// reads again from the store (restore.go).
type stored struct {
	ceiling, czxid int64
	deleted        bool
}

// storedOf is what the primary keeps of r.
func storedOf(r persist.Record) stored {
	return stored{ceiling: r.Ceiling, czxid: r.Czxid, deleted: r.Deleted()}
}

// join is s after the store accepted r from this primary, as far as s can
// tell without the store's whole record: the higher ceiling with its
// observation; deleted unless r is the birth of a new incarnation (whose
// floor is above every deletion the store knew), and deleted once r is a
// tombstone that takes.
func (s stored) join(r persist.Record) stored {
	out := s
	if r.Ceiling >= s.ceiling {
		out.ceiling, out.czxid = r.Ceiling, r.Czxid
	}
	switch {
	case r.Live > r.Dead:
		out.deleted = false
	case r.Dead > 0:
		out.deleted = s.deleted || r.Deleted()
	}
	return out
}

// record is s as the store's record of name, as far as s knows it: no
// configuration, Epoch and Updated zero, and a tombstone up to the ceiling
// when deleted.
func (s stored) record(name string) persist.Record {
	r := persist.Record{Name: name, Ceiling: s.ceiling, Czxid: s.czxid}
	if s.deleted {
		r.Dead = max(s.ceiling, 1)
	}
	return r
}
