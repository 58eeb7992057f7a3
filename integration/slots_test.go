package integration

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clusterSlots is how many of the suite's clusters run at once: each test
// and each of TestChaos's clusters is a parallel test that holds a slot
// (or more, slotWeight) while it runs. A cluster under its workload keeps
// more than one core busy (three ZooKeeper JVMs, MinIO, three replicas,
// four worker processes built with -race, the HTTP workers and the
// checker), so more at once on two cores only share them out.
const clusterSlots = 3

// slotWeight is how many slots a test holds: the upgrade tests assert
// timings (no call longer than ceiling_wait, 5 s) that three clusters at
// once on two cores starved (calls of 5.8 s to 9 s, none over 3.5 s
// beside one other cluster), so they run beside one other cluster at
// most. Every other test holds one.
var slotWeight = map[string]int{
	"TestRollingUpgrade":           2,
	"TestRollingUpgradeCustomRoot": 2,
}

// slotOrder ranks the tests for the slots, in the order they start: the
// longest first, so that the suite ends about when its longest test
// does, and the heavy ones where a slot would otherwise stand idle; a
// test not listed comes last.
var slotOrder = []string{
	"TestRollingUpgrade",
	"TestChaos/rollback",
	"TestChaosMixed",
	"TestRollingUpgradeCustomRoot",
	"TestChaos/replicas",
	"TestChaos/store",
	"TestChaos/zookeeper",
	"TestAlertsFireInPrometheus",
	"TestSmoke",
	"TestSmokeOverTLS",
	"TestImageTalksHTTPSToS3",
}

// slotGather is how long slots are held back after the first request:
// go test releases the parallel tests together, and they all ask within
// it, so the first slots go by rank too.
const slotGather = time.Second

var slots = struct {
	mu      sync.Mutex
	free    int
	first   time.Time
	waiting []*slotWaiter
	held    []string // for writeSlotLog
}{free: clusterSlots}

type slotWaiter struct {
	rank, weight int
	ready        chan struct{}
}

// clusterSlotsFirst lets go test release every parallel test at once
// (unless -parallel is given): the slots, not go test, decide which run.
// It runs before m.Run reads the flag.
func clusterSlotsFirst() {
	p := flag.Lookup("test.parallel")
	if p == nil {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f == p })
	if !set {
		_ = p.Value.Set(strconv.Itoa(len(slotOrder) + 8))
	}
}

// takeClusterSlot makes t a parallel test and returns once it holds its
// cluster slots, which it gives back when it ends.
func takeClusterSlot(t *testing.T) {
	t.Parallel()
	rank := slices.Index(slotOrder, t.Name())
	if rank < 0 {
		rank = len(slotOrder)
	}
	w := &slotWaiter{rank: rank, weight: min(max(1, slotWeight[t.Name()]), clusterSlots), ready: make(chan struct{})}
	slots.mu.Lock()
	if slots.first.IsZero() {
		slots.first = time.Now()
		time.AfterFunc(slotGather, grantSlots)
	}
	gathering := time.Since(slots.first) < slotGather
	slots.waiting = append(slots.waiting, w)
	slots.mu.Unlock()
	if !gathering {
		grantSlots()
	}
	asked := time.Now()
	<-w.ready
	held := time.Now()
	t.Logf("cluster slots: %d of %d, after %.1fs", w.weight, clusterSlots, held.Sub(asked).Seconds())
	t.Cleanup(func() {
		slots.mu.Lock()
		slots.free += w.weight
		slots.held = append(slots.held, fmt.Sprintf("%5.0fs to %5.0fs  %d slot(s)  %s",
			held.Sub(slots.first).Seconds(), time.Since(slots.first).Seconds(), w.weight, t.Name()))
		slots.mu.Unlock()
		grantSlots()
	})
}

// writeSlotLog writes, to the file SEQKEEPER_SLOT_LOG names (if any),
// when each test held its slots, in seconds since the first asked:
// scripts/test.sh prints it, so that a run's log shows which tests the
// suite's time went to and where slots stood idle.
func writeSlotLog() {
	path := os.Getenv("SEQKEEPER_SLOT_LOG")
	if path == "" {
		return
	}
	slots.mu.Lock()
	defer slots.mu.Unlock()
	slices.Sort(slots.held)
	if err := os.WriteFile(path, []byte(strings.Join(slots.held, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "SEQKEEPER_SLOT_LOG: %v\n", err)
	}
}

// grantSlots gives the free slots to the waiting tests in rank order; a
// test waits until its predecessors have theirs.
func grantSlots() {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	slices.SortStableFunc(slots.waiting, func(a, b *slotWaiter) int { return a.rank - b.rank })
	for len(slots.waiting) > 0 && slots.free >= slots.waiting[0].weight {
		w := slots.waiting[0]
		close(w.ready)
		slots.waiting = slots.waiting[1:]
		slots.free -= w.weight
	}
}
