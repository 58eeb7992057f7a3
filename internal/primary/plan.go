package primary

import (
	"math"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/watcher"
)

// reserve is a sequence's low-water mark: when this many IDs or fewer are
// left below its ceiling the primary raises it, to twice this above next
// (reconcile.Headroom). That raise target is the largest of a runway of the
// sequence's smoothed demand, twice its largest recent burst (the most IDs
// taken in one rate sample, decaying over the runway; the sample in
// progress counts, so that a burst is covered before its sample closes) and
// twice MinReserve. A burst is covered by headroom sized to the burst, not
// by a runway of its peak rate, so that one large take does not put the
// ceiling far ahead: every ID reserved above next is skipped at the next
// ZooKeeper data loss. A bounded space caps the reserve
// (reconcile.CapReserve).
//
// A legacy counter has no ceiling: decide sets its mark reserve above the
// counter, and marks it again when half of that is left, so its reserve is
// the whole target (with MinReserve as it is).
func (p *Primary) reserve(t *tracked) int64 {
	st := t.state
	runway := p.rateOf(t) * p.cfg.Runway.Seconds()
	burst := float64(t.burst)
	if !st.Legacy && !st.Registered && st.Next > t.lastNext {
		burst = max(burst, float64(st.Next-t.lastNext))
	}
	want := max(runway/2, burst)
	if st.Legacy {
		want = max(runway, 2*burst)
	}
	if want > float64(p.cfg.MaxReserve) {
		return reconcile.CapReserve(p.cfg.MaxReserve, st.Start, st.End, st.Legacy)
	}
	return reconcile.CapReserve(max(p.cfg.MinReserve, int64(math.Ceil(want))), st.Start, st.End, st.Legacy)
}

// rateWindow is the shortest interval over which a consumption rate is
// measured.
const rateWindow = time.Second

// rateOf is t's demand in IDs per second. The rate observe keeps is a mean
// that starts at nil when this primary first sees the sequence: right for
// one it saw registered (born), whose demand before was nil. One it took
// over has an unknown past, and that mean would count every second before
// the term as a second without takes (a fifth of the demand 15 s into the
// term, half of it after 40 s), so after a takeover that found reserves
// used up (a failover that took long, a refused rollback) a raise delayed
// a few seconds by a loaded disk would leave takes waiting at the ceiling.
// So its rate is the mean over the seconds its samples cover, every second
// weighted as observe weighs it (the bias correction of an exponential
// mean started at zero), counting at least a quarter runway: a burst in a
// term's first second sizes the reserve as if spread over 15 s (at the
// default runway), no more than the twice-the-burst headroom it already
// gets. The samples, not the term: the seconds before the first event
// (a slow start, a watch set late) carry no sample, and counting them
// would read too little of the demand just after a slow takeover.
func (p *Primary) rateOf(t *tracked) float64 {
	if t.born {
		return float64(t.rate)
	}
	runway := p.cfg.Runway.Seconds()
	covered := max(float64(t.sampled), runway/4)
	return float64(t.rate) / -math.Expm1(-covered/runway)
}

// observe updates what the primary knows of a sequence from an event.
func (p *Primary) observe(ev watcher.Event) *tracked {
	st, err := state.ParseState(ev.Name, ev.Data)
	p.view.Lock()
	defer p.view.Unlock()
	t := p.seqs[ev.Name]
	if t == nil {
		t = &tracked{}
		p.seqs[ev.Name] = t
		p.adopt(ev.Name, t)
		p.namesStale = true
	}
	if err == nil && seqzk.Unconfirmed(st) && ev.Czxid == t.czxid && t.state.Validated() && t.state.Marker == st.Marker && t.state.PushFloor == st.PushFloor {
		// Our own initialisation, read before the stamp we made of it
		// once the store held the birth (noteCarried): already decided.
		// In a rolled-back history the epoch's change revalidates it.
		return t
	}
	t.czxid, t.mzxid, t.version, t.fresh = ev.Czxid, ev.Mzxid, ev.Version, true
	t.corrupt = err
	if err != nil {
		p.log.Error().Err(err).Str("sequence", ev.Name).Msg("primary: corrupt sequence state; leaving it alone until repaired")
		return t
	}
	now := max(time.Since(clockBase), 1) // 0 means no sample
	if st.Registered {
		t.born = true
	}
	switch {
	case st.Registered || t.lastAt == 0:
		t.lastNext, t.lastAt = st.Next, now
	case st.Marker != t.state.Marker:
		// Stamped anew since the last look (an operator's advance, a
		// restore, a revalidation): next moved by decree, not by takes.
		// The rate's baseline starts again here, or the jump would count
		// as demand and size a reserve that every later failover, restore
		// or move skips.
		t.lastNext, t.lastAt = st.Next, now
	case st.Next < t.lastNext:
		// Older than what we know: an event read before our own write
		// (a resync races it) or a rollback about to be revalidated. The
		// baseline never moves back, or our own fast-forward would later
		// count as consumption.
	default:
		// Sample over at least a second: a client's batch arrives in one
		// write, and over a few milliseconds it would look like a huge
		// rate (and a reserve that every ZooKeeper election then skips).
		if dt := (now - t.lastAt).Seconds(); dt >= rateWindow.Seconds() {
			// Smoothed over the runway: a sample of dt seconds weighs
			// 1-exp(-dt/Runway), so a steady rate is reached within about
			// a runway, and a burst adds at most its own size to a runway
			// of the rate (1-exp(-x) <= x), not a runway of its peak.
			// The burst itself is covered by headroom sized to it
			// (reserve), remembered about as long.
			taken := float64(st.Next - t.lastNext)
			keep := math.Exp(-dt / p.cfg.Runway.Seconds())
			t.rate = float32(keep*float64(t.rate) + (1-keep)*taken/dt)
			t.sampled += float32(dt)
			t.burst = float32(max(keep*float64(t.burst), taken))
			t.lastNext, t.lastAt = st.Next, now
		}
	}
	t.state = st
	if st.Legacy {
		p.legacyMoved[ev.Name] = struct{}{}
	}
	return t
}

// plan is one sequence's decided change: the store first, then ZooKeeper.
type plan struct {
	name  string
	kind  planKind
	floor int64 // for revalidations: next moves at least here
	// rec is the record to store first; its Ceiling is the new ceiling (or
	// legacy mark) that ZooKeeper then gets.
	rec persist.Record
	// guard, for an initialisation, is the name's deletion record as read
	// when the floor was chosen (births).
	guard seqzk.Deletion
	// born, for a confirmation, is the Unconfirmed state the
	// initialisation wrote.
	born state.State
}

// withCeiling is rec with the ceiling it is to store.
func withCeiling(rec persist.Record, ceiling int64) persist.Record {
	rec.Ceiling = ceiling
	return rec
}

// birth is what an initialisation of a registration starts from, read
// afresh after the registration was seen (prepareBirths): its floor, above
// every ID any earlier incarnation of the name may have handed out as the
// store and ZooKeeper's deletion record say, and that record.
type birth struct {
	floor int64
	guard seqzk.Deletion
}

type planKind int

const (
	planRaise planKind = iota + 1
	planInit
	planRevalidate
	planFastForward
	planLegacyMark
	planLegacyForward
	planRotate
	planConfirm // the stamp of a birth the store has recorded
)

// decide returns what a sequence needs, if anything.
func (p *Primary) decide(name string, t *tracked) (plan, bool) {
	if t.corrupt != nil || (p.broken != nil && persist.Affects(p.broken, name)) {
		return plan{}, false
	}
	st := t.state
	kept, stored := p.record(name)
	rec := kept.record(name)
	reserve := p.reserve(t)
	headroom := reconcile.Headroom(reserve)
	base := persist.Record{Name: name, Czxid: t.czxid, Mzxid: t.mzxid, Version: t.version,
		Start: st.Start, End: st.End, Windows: st.Windows, Seen: p.era.Value}
	switch {
	case st.Legacy:
		base.Legacy = true
		if stored && st.Next < rec.Ceiling && epochOf(t.mzxid) < p.zkEpoch {
			// Last written before ZooKeeper's latest leader election: a
			// restore from an older copy may have taken the counter back
			// below what workers took. Move it up to the stored mark (IDs
			// taken past the mark before the primary saw them stay
			// uncovered: docs/guarantees.md).
			to := min(rec.Ceiling, state.MaxLegacyCounter-reserve)
			return plan{name: name, kind: planLegacyForward, floor: to, rec: withCeiling(base, to+reserve)}, true
		}
		if stored && st.Next < rec.Ceiling-reserve/2 {
			return plan{}, false
		}
		return plan{name: name, kind: planLegacyMark, rec: withCeiling(base, st.Next+reserve)}, true
	case st.Registered:
		// A new sequence, or one created again after a delete: a new
		// incarnation, which starts above anything an earlier one of
		// this name handed out. The floor is read afresh once the
		// registration was seen (the primary's copy of the store's
		// records may predate an operator's delete, advance or import),
		// and the initialisation checks that no delete overtook it.
		b, ok := p.births[name]
		if !ok {
			return plan{}, false // decided once prepareBirths has read its floor
		}
		// The store learns the new incarnation (Live) only once
		// ZooKeeper has it (apply confirms it): a birth that a delete
		// overtakes must not leave the store claiming a live name that
		// ZooKeeper never held (a restore would bring it back).
		floor := max(st.Start, b.floor)
		return plan{name: name, kind: planInit, floor: floor, guard: b.guard, rec: withCeiling(base, reconcile.Ceiling(floor, headroom, st.End))}, true
	}
	floor := reconcile.Floor(st, rec, stored)
	if seqzk.Unconfirmed(st) {
		// A birth the store may not have recorded (its primary stopped
		// first): ZooKeeper holds it, so the store learns it with the
		// ceiling, before the stamp lets anyone take from it.
		base.Live = st.PushFloor
	}
	switch {
	case stored && rec.Czxid != 0 && rec.Czxid != t.czxid:
		p.log.Warn().Str("sequence", name).Int64("czxid", t.czxid).Int64("stored_czxid", rec.Czxid).
			Msg("primary: sequence znode was re-created; fast-forwarding past the stored ceiling")
		return plan{name: name, kind: planFastForward, floor: floor, rec: withCeiling(base, reconcile.Ceiling(floor, headroom, st.End))}, true
	case !st.Validated() || st.ZKEpoch != p.zkEpoch || st.ZKEpoch != epochOf(t.mzxid):
		// Not stamped in this epoch (or stamped by a release without
		// markers, which clients no longer take from).
		return plan{name: name, kind: planRevalidate, floor: floor, rec: withCeiling(base, reconcile.Ceiling(floor, headroom, st.End))}, true
	case t.version >= p.cfg.RotateVersion:
		return plan{name: name, kind: planRotate, floor: floor, rec: withCeiling(base, st.Ceiling)}, true
	case st.Ceiling < st.End && st.Ceiling-st.Next+1 <= reserve:
		// At the low-water mark, not only below it: a take of a whole
		// burst (the reserve's size for a lumpy sequence) leaves exactly
		// the reserve, and the next such take must find a raise made,
		// not an empty reserve (BenchmarkBusy, docs/performance.md).
		return plan{name: name, kind: planRaise, floor: floor, rec: withCeiling(base, reconcile.Ceiling(st.Next, headroom, st.End))}, true
	case !stored || rec.Ceiling < st.Ceiling:
		// The store must cover the ZooKeeper ceiling; persist it again.
		return plan{name: name, kind: planRaise, floor: floor, rec: withCeiling(base, st.Ceiling)}, true
	}
	return plan{}, false
}

func epochOf(zxid int64) int64 { return zxid >> 32 }
