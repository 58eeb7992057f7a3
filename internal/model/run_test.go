package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// runModel is one run: set up, drive operations until the duration, the
// operation limit (0: none) or the first failure, then tear down.
func runModel(t *testing.T, set settings, maxOps int) outcome {
	began := time.Now()
	specs := slices.DeleteFunc(specsFor(set.seed), func(s seqSpec) bool { return set.skip["seq:"+s.name] })
	m := newModel(specs)
	e := setup(t, set.seed, m, specs, set.tls)
	e.skip = set.skip
	var once sync.Once
	closeEnv := func() { once.Do(e.close) }
	t.Cleanup(closeEnv)

	deadline := runDeadline(began, set.duration)
	op := 0
	for !m.failed() && time.Now().Before(deadline) && (maxOps == 0 || op < maxOps) {
		op++
		e.step(set.seed, op)
	}
	if !m.failed() {
		e.resumeStale()
		e.settle(20 * time.Second)
		e.checkLatent("end of run")
	}
	closeEnv()

	m.mu.Lock()
	defer m.mu.Unlock()
	return outcome{
		ops:      op,
		failed:   len(m.failures) > 0,
		failOp:   m.failOp,
		failures: m.failures,
		tail:     lastN(m.recent, recentOps),
		plog:     m.plog.tail(),
		faults:   m.faults,
		elapsed:  time.Since(began),
		summary:  m.summary(set.seed, op, time.Since(began)),
	}
}

// step runs operation op of the root's driver: it resumes a delayed take
// that is due, notes what the store covers again, and runs one operation
// chosen by seed and op alone (the fallback, a take, when the choice is
// skipped or not possible now).
func (e *env) step(seed uint64, op int) {
	m := e.m
	m.mu.Lock()
	m.op = op
	m.mu.Unlock()
	if s := e.stale; s != nil && (op >= s.resumeAt || time.Now().After(s.deadline)) {
		e.resumeStale()
	}
	e.storeCovers()
	if op%5 == 0 {
		e.archiveStore()
	}
	// Each operation's choices come from the seed and its index alone.
	r := rand.New(rand.NewPCG(seed, uint64(op)))
	o := pickOp(r)
	line, ok := "", false
	if !e.skip[o.name] {
		line, ok = o.run(e, r)
	}
	if !ok {
		o = opTable[0]
		line, _ = o.run(e, r)
	}
	m.mu.Lock()
	m.opsByKind[o.name]++
	m.logOp(fmt.Sprintf("#%-5d %s", op, line))
	for _, f := range m.failures[m.logged:] {
		m.logOp("       !! " + firstLine(f))
	}
	m.logged = len(m.failures)
	m.mu.Unlock()
}
