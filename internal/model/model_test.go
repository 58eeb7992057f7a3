// Package model holds TestModel: a seeded, model-based randomized test of
// seqkeeper's first invariant (no ID is ever handed out twice) against real
// servers, driven through the faults the design brief promises to survive.
package model

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// TestModel runs a random sequence of operations, chosen by one seed, on a
// handful of sequences served by a one-node quorum-mode ZooKeeper (a real
// server process from testenv), a file store in a temporary directory, a
// primary (replaced now and then) and several worker clients, and checks
// every ID handed out against a model.
//
// What it checks, for every take that succeeds (an errored take hands out
// nothing and is only counted):
//
//   - unique: no ID of a sequence name is handed out twice, across all
//     workers, the whole run, and every incarnation of the name (delete and
//     re-create must never hand out an earlier incarnation's IDs), unless it
//     was pushed back in between (see ledger);
//   - in space: every ID lies within the sequence's [start, end] (and is not
//     MaxID itself for a space ending there);
//   - durable before usable: right after the take, the store's record of the
//     sequence has a ceiling at least as high as every ID handed out, unless
//     a store fault lost that record and the store does not yet cover the
//     sequence again (for longer than a raise can be in flight: one whose
//     store write the fault lost may still raise ZooKeeper after it);
//   - pushes: a push of IDs that were never issued (far above the ceiling,
//     or still unissued in an open window), outside the space, or already in
//     the recycled list must be refused with sequence.ErrBadPush; one that is
//     accepted fails the test (when the test can prove that nothing else
//     changed the sequence between its read and the push);
//   - deletes: the tombstone's ceiling covers every ID the name handed out;
//   - advances: no ID an advance skipped (between the old next and the new
//     one) or dropped (recycled IDs) is ever handed out afterwards, a
//     sequence never moves back, and an advance beyond the space is
//     refused;
//   - moves: an import of the root's own export into a wiped ZooKeeper and
//     an empty store refuses nothing, a second import changes nothing, and
//     every ID afterwards is checked against the whole run;
//   - widens: a space never narrows, and every ID stays inside the widest
//     space asked for (the store may hold it even when the widen failed);
//   - adoptions: a Curator counter adopted while workers take from it
//     hands out no ID its old system or its takers handed out (they count
//     as issued), its store record covers the adopted state at once, and
//     it is one more sequence of the run from then on, under every fault;
//   - operator races: two or three lifecycle commands (delete, create,
//     advance, widen, import of a live line or of another root's
//     tombstone, restore) on one name at once, from two operators' sessions,
//     beside a taker and the primary, leave ZooKeeper and the store agreeing
//     on whether the name lives, lose or revive a name only by a delete or
//     a create, and floor every later incarnation above an imported
//     tombstone (opOperatorRace).
//
// The faults: primary handovers (graceful, killed session, expired session
// with the deposed primary's delayed writes, and deposed while alive: a
// successor takes the store while the old primary works on, its session
// live and its ZooKeeper writes going through, for an overlap of up to
// seconds under traffic, fenced by the store alone), ZooKeeper restarts
// (SIGTERM or SIGKILL), full wipes of its data, snapshots and restores from any earlier
// snapshot (so 0, 1 or more restarts lie between copy and restore), delayed
// takes from a worker whose network is frozen while other faults happen,
// deletes and re-creates, store objects deleted (the store lost data), a
// primary that dies in the middle of a compaction of the store's log (its
// store stops after a random number of requests), operators' advances
// beside busy workers, and moves of the whole root (export, lose ZooKeeper's
// data and the store, import) as docs/cli.md tells an operator to do.
//
// Out of scope: the promise holds only while ZooKeeper and the store do not
// both lose data, so no ZooKeeper data loss is injected while the store does
// not cover every sequence's ZooKeeper ceiling, no restore goes back to a
// snapshot older than a store loss, and no store loss is injected while
// ZooKeeper has not revalidated every live sequence in its current epoch (or
// when it would lose the tombstone of a deleted name, which lives only in
// the store). Liveness is not checked: takes may fail while faults are
// active (counted by error class). Legacy 8-byte counters other than
// during their adoption (their guarantee is the weaker one adopt ends),
// the election package (primaries are started and stopped by the test) and
// S3 (the file store has the same semantics) are not exercised. Several
// replicas contending for leadership are not modelled: a deposed primary is
// stopped by the test, as its election would (depose-primary lets it run
// beside its successor first).
//
// Environment:
//
//	SEQKEEPER_MODEL_SEED      the seed (decimal or 0x hex); default from the clock
//	SEQKEEPER_MODEL_DURATION  how long to run (Go duration); default 45s (15s with -short)
//	SEQKEEPER_MODEL_OPS       stop after this many operations (replay a prefix)
//	SEQKEEPER_MODEL_SHRINK    0 disables re-running a failing seed with fewer operations
//	SEQKEEPER_MODEL_SKIP      operations not to run, comma-separated: names from opTable
//	                          (or rootFaults, for TestModelSeveralRoots),
//	                          push-invalid:<kind> (beyond, outside, overlap, window), or
//	                          seq:<name> (a sequence of specsFor); to look past a known
//	                          bug while it is being fixed
//
// A long run:
//
//	SEQKEEPER_MODEL_DURATION=30m go test -count=1 -run TestModel -timeout 40m ./internal/model
//
// A seed replays the same choices of operations only as far as their
// outcomes are the same (an operation's choices come from the seed and its
// index, and which operations are possible depends on earlier outcomes), so
// a replay usually, not always, takes the same path.
func TestModel(t *testing.T) {
	// Each run has servers of its own and a fixed length, and the oracle
	// judges outcomes, not timings: the package's runs overlap.
	t.Parallel()
	set := loadSettings(t)
	t.Logf("seed %#x (SEQKEEPER_MODEL_SEED=%d), duration %s, ops limit %d, skipping %v",
		set.seed, set.seed, set.duration, set.maxOps, slices.Sorted(maps.Keys(set.skip)))
	out := runModel(t, set, set.maxOps)
	t.Log(out.summary)
	if !out.failed {
		return
	}
	t.Errorf("%s", out.report(set.seed))
	if !set.shrink {
		return
	}
	shrink(t, set, out)
}

// TestModelOverTLS is a short run in which the primary, the workers and
// the operator talk TLS to a ZooKeeper that serves TLS only and knows them
// by their client certificate (x509:CN=seqkeeper): the proxies that cut
// connections carry TLS, and ZooKeeper's wipes and rollbacks keep its TLS
// port. SEQKEEPER_MODEL_TLS_DURATION sets its length (default 20s, 8s with
// -short); the other settings are TestModel's.
func TestModelOverTLS(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	set := loadSettings(t)
	set.tls, set.duration = true, 20*time.Second
	if v := os.Getenv("SEQKEEPER_MODEL_TLS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SEQKEEPER_MODEL_TLS_DURATION=%q: want a positive Go duration", v)
		}
		set.duration = d
	}
	t.Logf("seed %#x (SEQKEEPER_MODEL_SEED=%d), over TLS, duration %s", set.seed, set.seed, set.duration)
	out := runModel(t, set, set.maxOps)
	t.Log(out.summary)
	if out.failed {
		t.Errorf("%s", out.report(set.seed))
	}
}

// settings are the run's parameters, from the environment.
type settings struct {
	seed     uint64
	duration time.Duration
	maxOps   int
	shrink   bool
	skip     map[string]bool
	// tls runs every client over TLS, with an x509 identity, against a
	// ZooKeeper that serves TLS only (SEQKEEPER_MODEL_TLS=1, and
	// TestModelOverTLS).
	tls bool
}

func loadSettings(t *testing.T) settings {
	s := settings{seed: uint64(time.Now().UnixNano()), duration: shortOr(45*time.Second, 15*time.Second), shrink: true}
	if v := os.Getenv("SEQKEEPER_MODEL_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("SEQKEEPER_MODEL_SEED=%q: %v", v, err)
		}
		s.seed = seed
	}
	if v := os.Getenv("SEQKEEPER_MODEL_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SEQKEEPER_MODEL_DURATION=%q: want a positive Go duration such as 90s or 30m", v)
		}
		s.duration = d
	}
	if v := os.Getenv("SEQKEEPER_MODEL_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SEQKEEPER_MODEL_OPS=%q: want a positive number of operations", v)
		}
		s.maxOps = n
	}
	if os.Getenv("SEQKEEPER_MODEL_SHRINK") == "0" {
		s.shrink = false
	}
	s.tls = os.Getenv("SEQKEEPER_MODEL_TLS") == "1"
	s.skip = map[string]bool{}
	for _, k := range strings.Split(os.Getenv("SEQKEEPER_MODEL_SKIP"), ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		known := slices.Contains(invalidKinds, strings.TrimPrefix(k, "push-invalid:")) ||
			slices.ContainsFunc(specsFor(0), func(s seqSpec) bool { return "seq:"+s.name == k })
		for _, o := range opTable {
			known = known || o.name == k
		}
		for _, f := range rootFaults { // TestModelSeveralRoots's
			known = known || f.name == k
		}
		if !known || k == opTable[0].name {
			t.Fatalf("SEQKEEPER_MODEL_SKIP: %q is not an operation that can be skipped (see opTable and invalidKinds)", k)
		}
		s.skip[k] = true
	}
	return s
}

// outcome is what one run found.
type outcome struct {
	ops      int // operations started
	failed   bool
	failOp   int // the operation during which the first failure was seen
	failures []string
	tail     []string // the last operations, for the report
	faults   []string
	elapsed  time.Duration
	summary  string
	// label names the root of a run of several roots in the report
	// (empty for TestModel), and replay, when set, replaces TestModel's
	// replay line.
	label  string
	replay string
	plog   []string // the primaries' last log lines
}

// report is the failure message: the seed, how to replay, what failed and
// the operations before it.
func (o outcome) report(seed uint64) string {
	var b strings.Builder
	tag := fmt.Sprintf("seed %#x", seed)
	if o.label != "" {
		tag += " " + o.label
	}
	fmt.Fprintf(&b, "%s: %d failure(s), the first at op #%d after %s\n", tag, len(o.failures), o.failOp, o.elapsed.Round(time.Second))
	if o.replay != "" {
		fmt.Fprintf(&b, "replay: %s\n", o.replay)
	} else {
		fmt.Fprintf(&b, "replay: SEQKEEPER_MODEL_SEED=%d SEQKEEPER_MODEL_OPS=%d go test -count=1 -run 'TestModel$' -v ./internal/model\n", seed, o.failOp)
	}
	for i, f := range o.failures {
		if i == 10 {
			fmt.Fprintf(&b, "  ... %d more\n", len(o.failures)-10)
			break
		}
		fmt.Fprintf(&b, "  [%s] %s\n", tag, f)
	}
	fmt.Fprintf(&b, "faults injected (op: fault):\n")
	for _, f := range lastN(o.faults, 60) {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "last %d operations:\n", len(o.tail))
	for _, l := range o.tail {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "the primaries' last %d log lines:\n", len(o.plog))
	for _, l := range o.plog {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// primaryLog keeps the last lines a root's primaries logged, for the
// report of a failure: what they decided, and why.
type primaryLog struct {
	mu    sync.Mutex
	lines []string
}

const primaryLogLines = 200

// Write takes one line (zerolog writes one per event).
func (l *primaryLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = keepLast(l.lines, strings.TrimSpace(string(p)), primaryLogLines)
	return len(p), nil
}

func (l *primaryLog) tail() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(lastN(l.lines, primaryLogLines))
}

// keepLast appends line to s, which keeps at least its last n lines: it is
// cut to them once it holds 4n, so that it is copied only now and then.
func keepLast(s []string, line string, n int) []string {
	s = append(s, line)
	if len(s) > 4*n {
		s = slices.Clone(s[len(s)-n:])
	}
	return s
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// shrink re-runs a failing seed with fewer operations (halving, at most
// three times, as long as the test's deadline leaves room) and reports the
// shortest run that still failed.
func shrink(t *testing.T, set settings, first outcome) {
	best := first
	limit := first.failOp
	for attempt := 1; attempt <= 3 && limit > 1; attempt++ {
		limit /= 2
		// A prefix of n operations takes about n/ops of the first run.
		need := time.Duration(float64(first.elapsed)*float64(limit)/float64(max(first.ops, 1))) + time.Minute
		if dl, ok := t.Deadline(); ok && time.Until(dl) < need {
			t.Logf("shrink: no time left for a run of %d operations (need about %s)", limit, need.Round(time.Second))
			break
		}
		t.Logf("shrink %d: re-running seed %#x with at most %d operations", attempt, set.seed, limit)
		out := runModel(t, set, limit)
		if !out.failed {
			t.Logf("shrink %d: %d operations did not fail (outcomes differ between runs)", attempt, limit)
			break
		}
		t.Logf("shrink %d: failed at op #%d: %s", attempt, out.failOp, firstLine(out.failures[0]))
		best, limit = out, out.failOp
	}
	if best.failOp < first.failOp {
		t.Errorf("shortest failing run found: %d operations\n%s", best.failOp, best.report(set.seed))
	} else {
		t.Logf("shortest failing run: the first, %d operations", first.failOp)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// model is the state shared by the run's goroutines (the driver, bursts of
// concurrent takes, a delayed take): the oracle, what each worker holds,
// what the store lost, and the counters. mu guards everything.
type model struct {
	plog    primaryLog
	mu      sync.Mutex
	op      int
	ledgers map[string]*ledger
	// held is, per worker and name, IDs the worker took and has not used
	// yet: the only IDs a valid push may return.
	held map[string]map[string]*idSet
	// lost names the sequences whose store record a store fault removed and
	// that the store does not cover again yet; coveredSince, those of them
	// the store covers, since when (see storeCovers).
	lost         map[string]bool
	coveredSince map[string]time.Time
	// storeGen counts store faults.
	storeGen int

	failures []string
	failOp   int
	logged   int // failures already in the operation log

	recent []string // ring of the last operations
	faults []string

	opsByKind map[string]int
	calls     map[string]int // "<op>/<error class>"
	samples   map[string]string
	notes     map[string]int // anomalies that are not failures
	handed    int64
	takesOK   int
}

func newModel(specs []seqSpec) *model {
	m := &model{
		ledgers: make(map[string]*ledger),
		held:    make(map[string]map[string]*idSet),
		lost:    make(map[string]bool),

		coveredSince: make(map[string]time.Time),
		opsByKind:    make(map[string]int),
		calls:        make(map[string]int),
		samples:      make(map[string]string),
		notes:        make(map[string]int),
	}
	for _, s := range specs {
		m.ledgers[s.name] = newLedger(s)
	}
	return m
}

const recentOps = 300

// logOp appends a line to the operation log; m.mu must be held.
func (m *model) logOp(line string) {
	m.recent = keepLast(m.recent, line, recentOps)
}

// fail records a failure; m.mu must be held.
func (m *model) fail(msg string) {
	if len(m.failures) == 0 {
		m.failOp = m.op
	}
	m.failures = append(m.failures, msg)
}

func (m *model) failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.failures) > 0
}

// call counts the result of a call; m.mu must be held.
func (m *model) call(kind string, err error) string {
	class := classify(err)
	key := kind + "/" + class
	m.calls[key]++
	if class == "other" && m.samples[key] == "" {
		m.samples[key] = err.Error()
	}
	return class
}

func (m *model) note(what string) {
	m.mu.Lock()
	m.notes[what]++
	m.mu.Unlock()
}

// summary returns the totals for the log; m.mu must be held.
func (m *model) summary(seed uint64, ops int, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %#x: %d operations in %s; %d successful takes handed out %d IDs\n", seed, ops, elapsed.Round(time.Second), m.takesOK, m.handed)
	section := func(title string, counts map[string]int) {
		fmt.Fprintf(&b, "%s:", title)
		if len(counts) == 0 {
			b.WriteString(" none")
		}
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(&b, "\n  %-40s %d", k, counts[k])
		}
		b.WriteString("\n")
	}
	section("operations by kind", m.opsByKind)
	section("calls by result (op/class)", m.calls)
	faults := map[string]int{}
	for _, f := range m.faults {
		_, kind, _ := strings.Cut(f, " ")
		kind, _, _ = strings.Cut(kind, " ")
		faults[kind]++
	}
	section("faults injected", faults)
	section("notes (not failures)", m.notes)
	for _, k := range slices.Sorted(maps.Keys(m.samples)) {
		fmt.Fprintf(&b, "sample of %s: %s\n", k, m.samples[k])
	}
	fmt.Fprintf(&b, "per sequence (IDs handed out, highest, ranges issued):")
	for _, name := range slices.Sorted(maps.Keys(m.ledgers)) {
		l := m.ledgers[name]
		fmt.Fprintf(&b, "\n  %-10s %8d  %d  %d", name, l.handed, l.highest, len(l.issued.rs))
	}
	return b.String()
}

// shortOr is full, or short under -short: the model's runs are shorter
// in the everyday loop (go test -short), and as long as ever in the full
// run. An explicit SEQKEEPER_MODEL_*DURATION wins either way.
func shortOr(full, short time.Duration) time.Duration {
	if testing.Short() {
		return short
	}
	return full
}

// runDeadline is when a run that began (its set-up included) at began
// and lasts d starts no more operations. Under -short it is d after the
// set-up instead: a short run on a loaded machine, whose servers may take
// most of d to start, still spends d on operations.
func runDeadline(began time.Time, d time.Duration) time.Time {
	if testing.Short() {
		return time.Now().Add(d)
	}
	return began.Add(d)
}
