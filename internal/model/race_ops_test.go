package model

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// raceKinds are the lifecycle commands opOperatorRace runs against each
// other on one name.
var raceKinds = []string{"delete", "create", "advance", "widen", "import-live", "import-tombstone", "restore"}

// raceAct is one operator's command in a race, and what it returned.
type raceAct struct {
	kind  string
	delay time.Duration
	to    int64          // advance: the next asked for
	widen seqzk.Widening // widen: what is asked for
	lines string         // import: the export to import
	tomb  int64          // import-tombstone: the imported ceiling

	err      error
	ceiling  int64            // delete: the tombstone's ceiling
	advanced primary.Advanced // advance
	widened  state.State      // widen
	outcome  string           // import: what it did with the line
}

// opOperatorRace runs two or three operators' lifecycle commands on one
// name at once, each operator on a ZooKeeper session of its own, while a
// worker takes from the name and the primary works: delete, create (a
// bare registration), advance, widen, import of the name's live line from
// an earlier export or of a tombstone from another root, and restore, in
// any mix. No outcome is predicted; what must hold whatever the order:
//
//   - ZooKeeper and the store agree once the primary has caught up: a
//     name ZooKeeper holds is not deleted in the store (a later loss of
//     ZooKeeper's data would lose it), and a name ZooKeeper does not hold
//     is deleted there (or its deletion is recorded in ZooKeeper, which the
//     primary's audit copies);
//   - a name is gone after the race only if a delete may have landed, and
//     back only if a create may have (an import or a restore never brings
//     back a deleted name);
//   - an imported tombstone that was recorded floors every later
//     incarnation: its IDs count as handed out (by the other root);
//   - every check of the rest of the run (IDs once across incarnations, a
//     deleted name stays deleted, skipped IDs never handed out) holds for
//     the outcome ZooKeeper shows.
func (e *env) opOperatorRace(r *rand.Rand) (string, bool) {
	// Only on a settled root: a name ZooKeeper lost and the primary has
	// yet to restore would come back during the race by itself.
	if e.stale != nil || !e.zkHealthy() {
		return "", false
	}
	// Not a name a ZooKeeper rollback may have brought back: the store
	// keeps it deleted while ZooKeeper holds it, by design
	// (docs/fault-model.md), until it is deleted again.
	var names []string
	for _, s := range e.specs {
		if !e.undeletable[s.name] {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	name := names[r.IntN(len(names))]
	existed := e.existsSure(name)
	m := e.m
	m.mu.Lock()
	highest := m.ledgers[name].highest
	m.mu.Unlock()
	acts := make([]*raceAct, 2+r.IntN(2))
	for i := range acts {
		acts[i] = e.raceAct(r, name, highest)
	}
	// The model's space follows a widen before it runs, whatever its
	// outcome: the taker may meet it at once, the store may hold it even
	// when it fails, and a restore bring it.
	m.mu.Lock()
	for _, a := range acts {
		if a.kind == "widen" {
			e.widenSpec(name, a.widen)
		}
	}
	m.mu.Unlock()

	second := e.client(e.connect(asAdmin, e.zkAddr, adminSession, time.Second), ceilingWait)
	defer second.ZK().Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	taker := e.pickWorker(r)
	done := make(chan struct{})
	var takes sync.WaitGroup
	takes.Go(func() {
		for n := int64(1); ; n++ {
			select {
			case <-done:
				return
			default:
			}
			e.take(taker, taker.label, name, 1+n%9, callTimeout)
		}
	})
	var wg sync.WaitGroup
	for i, a := range acts {
		c := e.admin
		if i%2 == 1 {
			c = second
		}
		wg.Go(func() {
			time.Sleep(a.delay)
			e.runRaceAct(ctx, c, name, a)
		})
	}
	wg.Wait()
	close(done)
	takes.Wait()
	line := e.judgeRace(name, existed, highest, acts)
	e.checkDeletedStayDeleted("an operators' race") // restore and import touch every name
	return line, true
}

// raceAct chooses one operator's command on name.
func (e *env) raceAct(r *rand.Rand, name string, highest int64) *raceAct {
	spec := e.spec(name)
	a := &raceAct{kind: raceKinds[r.IntN(len(raceKinds))], delay: time.Duration(r.IntN(20)) * time.Millisecond}
	switch a.kind {
	case "advance":
		a.to = min(state.AddSat(highest, 1+r.Int64N(5000)), spec.end())
	case "widen":
		if spec.reg.End != 0 {
			a.widen.End = spec.end() + 1 + r.Int64N(3000)
		} else {
			a.widen.Windows = min(spec.reg.Windows+1, 4)
		}
	case "import-live":
		a.lines = e.exportedLine(name)
	case "import-tombstone":
		if a.tomb = state.AddSat(max(highest, spec.start()), 1+r.Int64N(1000)); a.tomb < spec.end() {
			a.lines = fmt.Sprintf("{\"seqkeeper_export\":1,\"root\":\"/elsewhere\",\"exported_at\":\"2026-11-01T00:00:00Z\"}\n"+
				"{\"name\":%q,\"deleted\":true,\"ceiling\":%d}\n", name, a.tomb)
		}
	}
	if strings.HasPrefix(a.kind, "import") && a.lines == "" {
		a.kind = "create" // nothing to import
	}
	return a
}

// exportedLine returns an export of name alone, live, from the latest
// export that holds it live ("" when none does).
func (e *env) exportedLine(name string) string {
	for i := len(e.exports) - 1; i >= 0; i-- {
		sc := bufio.NewScanner(strings.NewReader(e.exports[i]))
		sc.Buffer(nil, 8<<20)
		header := ""
		for sc.Scan() {
			if header == "" {
				header = sc.Text()
				continue
			}
			var line transfer.Entry
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Name == name && !line.Deleted && !line.Legacy {
				return header + "\n" + sc.Text() + "\n"
			}
		}
	}
	return ""
}

// runRaceAct runs a with the operator's client c.
func (e *env) runRaceAct(ctx context.Context, c *seqzk.Client, name string, a *raceAct) {
	switch a.kind {
	case "delete":
		a.ceiling, a.err = deleteSequence(ctx, c, e.store, name)
	case "create":
		a.err = c.Register(ctx, name, e.spec(name).reg)
	case "advance":
		a.advanced, a.err = primary.Advance(ctx, c, e.store, name, a.to, operatorReserve)
	case "widen":
		a.widened, a.err = primary.Widen(ctx, c, e.store, name, a.widen)
	case "import-live", "import-tombstone":
		var outs []transfer.Outcome
		outs, a.err = transfer.Import(ctx, c, e.store, strings.NewReader(a.lines), transfer.ImportOptions{MinReserve: operatorReserve})
		if len(outs) == 1 {
			a.outcome = outs[0].Action
		}
	case "restore":
		var rep *reconcile.Report
		if rep, a.err = reconcile.Compare(ctx, c, e.store); a.err == nil {
			rep.Plan()
			a.err = reconcile.Apply(ctx, c, e.store, rep, operatorReserve)
		}
	}
}

// judgeRace brings the model to the outcome ZooKeeper shows after a race on
// name and checks it (see opOperatorRace); it returns the log line.
func (e *env) judgeRace(name string, existed bool, highest int64, acts []*raceAct) string {
	exists := e.existsSure(name)
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	// What landed: a create or a delete that succeeded, and one that may
	// have (any failure but "exists" or "unknown-sequence").
	var created, createdMaybe, deleted, deletedMaybe bool
	var parts []string
	l := m.ledgers[name]
	for _, a := range acts {
		class := m.call(a.kind, a.err)
		part := a.kind + " " + class
		switch {
		case a.kind == "create":
			created = created || a.err == nil
			createdMaybe = createdMaybe || class != "exists"
		case a.kind == "delete":
			deleted = deleted || a.err == nil
			deletedMaybe = deletedMaybe || class != "unknown-sequence"
			if a.err == nil && !m.lost[name] && a.ceiling < highest {
				m.fail(fmt.Sprintf("TOMBSTONE BELOW ISSUED: a delete of %q racing %d other operators at op #%d left a tombstone with ceiling %d, but %d was handed out before",
					name, len(acts)-1, m.op, a.ceiling, highest))
			}
		case a.kind == "advance" && a.err == nil && a.advanced.Changed():
			l.skip(m.op, a.advanced.Skipped())
			part += fmt.Sprintf(" to %d", a.advanced.State.Next)
		case a.kind == "widen" && a.err == nil:
			e.landedSpec(name, a.widened.End)
		case a.kind == "import-live" && a.outcome == transfer.Created:
			m.fail(fmt.Sprintf("DELETED NAME BACK: an import of %q's live line at op #%d created it, though the name was deleted in this root", name, m.op))
		case a.kind == "import-tombstone" && a.outcome == transfer.Tombstoned && (a.err == nil || e.deletionRecorded(name) >= a.tomb):
			// The other root handed out every ID up to the tombstone.
			imported := sequence.Range{Start: max(highest+1, l.spec.start()), End: a.tomb}
			if imported.Start <= imported.End {
				l.issued.add(imported)
				l.highest = max(l.highest, a.tomb)
				l.events = append(l.events, event{op: m.op, who: "import", what: "took (imported tombstone)", r: imported})
			}
		}
		if a.outcome != "" {
			part += " (" + a.outcome + ")"
		}
		parts = append(parts, part)
	}
	did := strings.Join(parts, ", ")
	line := fmt.Sprintf("operators race on %s (existed %v): %s -> exists %v", name, existed, did, exists)
	switch {
	case existed && !exists && !deletedMaybe, created && !exists && !deletedMaybe:
		m.fail(fmt.Sprintf("NAME LOST: %q (existed %v) does not exist after %s at op #%d, though no delete landed", name, existed, did, m.op))
	case !existed && exists && !createdMaybe, deleted && exists && !createdMaybe:
		m.fail(fmt.Sprintf("DELETED NAME BACK: %q (existed %v) exists after %s at op #%d, though no create landed", name, existed, did, m.op))
	}
	if exists {
		delete(e.deleted, name)
	} else if _, gone := e.deleted[name]; !gone || existed {
		e.deleted[name] = m.op
	}
	delete(e.undeletable, name) // ZooKeeper says what the name is now
	if m.lost[name] {
		return line + " (the store lost its record: not compared)"
	}
	m.mu.Unlock()
	agreed := e.storeAgrees(name, exists)
	m.mu.Lock()
	if agreed != "" {
		m.fail(fmt.Sprintf("STORE DISAGREES WITH ZOOKEEPER about %q after %s at op #%d: %s", name, did, m.op, agreed))
	}
	return line
}

// widenSpec makes the model's space of name follow a widen; m.mu must be
// held.
func (e *env) widenSpec(name string, w seqzk.Widening) {
	for i := range e.specs {
		if e.specs[i].name == name {
			e.specs[i].reg.End = max(e.specs[i].reg.End, w.End)
			e.specs[i].reg.Windows = max(e.specs[i].reg.Windows, w.Windows)
			e.m.ledgers[name].spec = e.specs[i]
		}
	}
}

// landedSpec records that a widen set name's space to end; m.mu must be
// held.
func (e *env) landedSpec(name string, end int64) {
	for i := range e.specs {
		if e.specs[i].name == name && end != 0 {
			e.specs[i].landedEnd = max(e.specs[i].endLanded(), end)
			e.m.ledgers[name].spec = e.specs[i]
		}
	}
}

// storeAgrees waits, up to a bound, until the store says what ZooKeeper
// does of name (live when exists, deleted otherwise: the primary's audit
// copies a deletion record the store lacks within seconds), and returns ""
// or what it says instead.
func (e *env) storeAgrees(name string, exists bool) string {
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		rec, err := e.store.Get(ctx, name)
		cancel()
		var says string
		switch {
		case errors.Is(err, persist.ErrNotFound):
			says = "no record"
			if exists {
				return "" // a live name's record comes with its first raise
			}
		case err != nil:
			says = "unreadable: " + err.Error()
		case exists && !rec.Deleted():
			return ""
		case exists && rec.Dead == state.MaxID:
			// An incarnation born after a death at the top of the space is
			// exhausted at birth, and its floor (MaxID) cannot be recorded
			// above the tombstone: the store holds it deleted, and a loss of
			// ZooKeeper's data loses a name with nothing left to hand out.
			e.m.note("a name re-created after a death at MaxID: the store holds it deleted (nothing left to hand out)")
			return ""
		case !exists && rec.Deleted():
			return ""
		default:
			says = fmt.Sprintf("%+v", rec)
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("ZooKeeper %s it, and 45 s later the store's record is %s", map[bool]string{true: "holds", false: "does not hold"}[exists], says)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
