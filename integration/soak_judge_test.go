package integration

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestSoakJudgesLeaks holds soakLeaks to its rule on made-up series: a
// flat noisy one and a sawtooth pass, a steady rise fails, and a rise
// that a restart cut short is judged by its runs.
func TestSoakJudgesLeaks(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	series := func(f func(i int) float64, runOf func(i int) float64) []soakPoint {
		var ps []soakPoint
		for i := range 240 { // an hour, one sample each 15 s
			ps = append(ps, soakPoint{start.Add(time.Duration(i) * 15 * time.Second), f(i), runOf(i)})
		}
		return ps
	}
	oneRun := func(int) float64 { return 1 }
	all := map[string][]soakPoint{
		"r1 goroutines": series(func(int) float64 { return 180 + float64(rng.IntN(40)) }, oneRun),
		"store objects": series(func(i int) float64 { return 40 + float64(i%20*5) }, oneRun), // compactions
		"r2 rss-bytes":  series(func(i int) float64 { return 40e6 + float64(i)*1e6 }, oneRun),
		// A rise in a run cut short by a restart, then flat: the first
		// run is too short to judge.
		"r3 open-files": series(func(i int) float64 { return 30 + float64(min(i, 120)) }, func(i int) float64 { return float64(i / 120) }),
		// Rising in both runs: the second is long enough to judge.
		"r3 zookeeper-watches": series(func(i int) float64 { return 6 + float64(i%120) }, func(i int) float64 { return float64(i / 120) }),
	}
	leaks := soakLeaks(all, start.Add(6*time.Minute))
	got := strings.Join(leaks, "\n")
	if len(leaks) != 2 || !strings.Contains(got, "r2 rss-bytes rose steadily") || !strings.Contains(got, "r3 zookeeper-watches rose steadily") {
		t.Fatalf("leaks found:\n%s\nwant r2's memory and r3's watches in its second run, nothing else", got)
	}
}
