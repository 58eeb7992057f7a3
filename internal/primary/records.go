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

// Where the store's records live. The primary knows the store's record of
// every name it has one for, in one place per name: in the name's tracked
// while it follows the sequence, in p.records otherwise (tombstones,
// sequences to restore, names whose znode is gone). One map entry per
// followed sequence, not two: an entry of a map by name costs tens of
// bytes, paid per sequence. Everything goes through the methods below,
// which keep that rule; callers hold p.view where they change anything.

// record returns what the primary knows of name's record in the store.
func (p *Primary) record(name string) (stored, bool) {
	if t := p.seqs[name]; t != nil {
		return t.rec()
	}
	s, ok := p.records[name]
	return s, ok
}

// storedCeiling is name's ceiling in the store as the primary knows it (0:
// no record).
func (p *Primary) storedCeiling(name string) int64 {
	s, _ := p.record(name)
	return s.ceiling
}

// setRecord records s as name's record.
func (p *Primary) setRecord(name string, s stored) {
	if t := p.seqs[name]; t != nil {
		t.keep(s)
		return
	}
	p.records[name] = s
}

// joinRecord joins r, accepted by the store, into what is known of its
// record (see stored.join; nothing known is the zero record).
func (p *Primary) joinRecord(r persist.Record) {
	s, _ := p.record(r.Name)
	p.setRecord(r.Name, s.join(r))
}

// dropRecord forgets name's record.
func (p *Primary) dropRecord(name string) {
	if t := p.seqs[name]; t != nil {
		t.forget()
	}
	delete(p.records, name)
}

// eachRecord calls f with every record known; f may drop or set the
// record it is given.
func (p *Primary) eachRecord(f func(name string, s stored)) {
	for name, t := range p.seqs {
		if s, ok := t.rec(); ok {
			f(name, s)
		}
	}
	for name, s := range p.records {
		f(name, s)
	}
}

// adopt moves name's record into t, which the primary has begun to follow.
func (p *Primary) adopt(name string, t *tracked) {
	if s, ok := p.records[name]; ok {
		t.keep(s)
		delete(p.records, name)
	}
}

// release moves t's record back into p.records as the primary stops
// following name.
func (p *Primary) release(name string, t *tracked) {
	if s, ok := t.rec(); ok {
		p.records[name] = s
	}
}

// compactRecords builds p.records anew once it holds less than a quarter
// of what it held when last built: a Go map keeps its size as entries
// leave, and at start it holds every name of the store, which then move
// into their tracked one by one. Call it holding p.view, outside any loop
// over p.records.
func (p *Primary) compactRecords() {
	if p.recordsBuilt < 1024 || len(p.records) >= p.recordsBuilt/4 {
		return
	}
	m := make(map[string]stored, len(p.records))
	for name, s := range p.records {
		m[name] = s
	}
	p.records, p.recordsBuilt = m, len(m)
}

// rec returns the store's record of t's sequence, if t holds it.
func (t *tracked) rec() (stored, bool) {
	return stored{ceiling: t.recCeiling, czxid: t.recCzxid, deleted: t.recDeleted}, t.hasRec
}

// keep makes t hold s as its sequence's record.
func (t *tracked) keep(s stored) {
	t.recCeiling, t.recCzxid, t.recDeleted, t.hasRec = s.ceiling, s.czxid, s.deleted, true
}

// forget makes t hold no record.
func (t *tracked) forget() {
	t.recCeiling, t.recCzxid, t.recDeleted, t.hasRec = 0, 0, false, false
}
