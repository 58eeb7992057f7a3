package model

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// operatorReserve is the min_reserve of the operator's advance and import.
const operatorReserve = 50

// opAdvance moves a live sequence forward as 'seqkeeper advance' does,
// while workers take and the primary raises: sometimes far, sometimes
// backwards (nothing may move back), sometimes beyond its space (refused).
// The IDs it skips, and the recycled IDs it drops, must never be handed
// out afterwards (the ledger's skipped set).
func (e *env) opAdvance(r *rand.Rand) (string, bool) {
	live := e.liveNames()
	if len(live) == 0 {
		return "", false
	}
	name := live[r.IntN(len(live))]
	spec := e.spec(name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, _, err := e.admin.Describe(ctx, name)
	if err != nil || st.Registered {
		return "", false
	}
	last := min(spec.end(), state.MaxID-1)
	to, kind := int64(0), ""
	switch x := r.IntN(10); {
	case x == 0 && last < state.MaxID-1:
		to, kind = last+1+r.Int64N(10), "beyond"
	case x == 1:
		to, kind = max(spec.start(), st.Next-r.Int64N(200)), "backwards"
	default:
		step := []int64{100, 10_000, 1_000_000}[r.IntN(3)]
		to, kind = min(st.Next+1+r.Int64N(step), last), "forward"
	}
	refuse := kind == "beyond" || st.Next > last
	a, err := primary.Advance(ctx, e.admin, e.store, name, to, operatorReserve)

	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("advance", err)
	line := fmt.Sprintf("advance %s --to %d (%s, next was %d) -> %s", name, to, kind, st.Next, class)
	switch {
	case refuse && err == nil:
		m.fail(fmt.Sprintf("ADVANCE ACCEPTED: %q advanced to %d beyond the last ID %d of its space (next %d), not refused: %+v", name, to, last, st.Next, a.State))
	case err != nil || !a.Changed():
		return line, true
	}
	if a.State.Next < to || a.State.Next < a.Replaced.Next {
		m.fail(fmt.Sprintf("ADVANCE WRONG: %q advanced to %d from next %d now has next %d", name, to, a.Replaced.Next, a.State.Next))
	}
	m.ledgers[name].skip(m.op, a.Skipped())
	return fmt.Sprintf("%s: next %d -> %d, %d recycled dropped", line, a.Replaced.Next, a.State.Next, a.Replaced.Recycled.Count()), true
}

// opMove moves the root to a new ensemble and a new store as
// docs/cli.md says: stop the primary, export, lose all of ZooKeeper's data
// and the whole store (as if both were new), import, and import again
// (which must change nothing); then a new primary starts. The workers
// keep taking throughout; every ID after the move is checked against the
// whole run's ledgers.
func (e *env) opMove(r *rand.Rand) (string, bool) {
	if e.stale != nil || !e.storeCovers() {
		return "", false
	}
	old := e.prim
	e.stopPrimary(old, "move")
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	var buf bytes.Buffer
	n, err := transfer.Export(ctx, e.admin, e.store, &buf)
	if err != nil {
		// ZooKeeper or the store did not answer: nothing moved.
		e.startPrimary()
		e.m.mu.Lock()
		e.m.call("export", err)
		e.m.mu.Unlock()
		return fmt.Sprintf("move: export failed (%v); %s -> %s", err, old.holder, e.prim.holder), true
	}
	exported := buf.String()
	e.zkFault(r.IntN(2) == 0, func() error { return e.ens.Wipe(0) })
	e.storeDir = e.t.TempDir()
	e.store = e.newStore()

	var outs []transfer.Outcome
	for attempt := 0; ; attempt++ {
		outs, err = transfer.Import(ctx, e.admin, e.store, bytes.NewReader(buf.Bytes()), transfer.ImportOptions{MinReserve: operatorReserve})
		if err == nil || attempt == 20 || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond) // the admin session reconnecting after the wipe
	}
	if err != nil {
		e.fatalf("import after the move: %v (export:\n%s)", err, exported)
	}
	again, err := transfer.Import(ctx, e.admin, e.store, bytes.NewReader(buf.Bytes()), transfer.ImportOptions{MinReserve: operatorReserve})
	if err != nil {
		e.fatalf("second import after the move: %v", err)
	}
	e.rollbackOp = e.m.op

	m := e.m
	m.mu.Lock()
	counts := map[string]int{}
	for _, o := range outs {
		counts[o.Action]++
		if o.Action == transfer.Refused {
			m.fail(fmt.Sprintf("IMPORT REFUSED line %d (%s) of its own export after a move: %s", o.Line, o.Name, o.Reason))
		}
	}
	for _, o := range again {
		if o.Action != transfer.Unchanged {
			m.fail(fmt.Sprintf("IMPORT NOT IDEMPOTENT: the second import did %s with line %d (%s): %s", o.Action, o.Line, o.Name, o.Reason))
		}
	}
	// The new store holds a record of every sequence and tombstone.
	clear(m.lost)
	clear(m.coveredSince)
	m.storeGen++ // ZooKeeper copies from before the move belong to the old store
	m.mu.Unlock()

	e.startPrimary()
	what := fmt.Sprintf("move %s -> %s: exported %d sequences and %d tombstones; imported %v", old.holder, e.prim.holder, n.Sequences, n.Tombstones, counts)
	e.fault(what)
	e.afterZK(r, "move")
	return what, true
}
