package election

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// Handover benchmarks report distributions, not just a mean: what matters
// to users is how long the cluster is without a primary, and its tail.
// Each runs at least 20 handovers whatever -benchtime says; ns/op is the
// mean handover. Reproduce with:
//
//	go test -run '^$' -bench Handover -benchtime 30x ./election/

// BenchmarkHandoverResign: from the Resign call to the successor's lead call.
func BenchmarkHandoverResign(b *testing.B) {
	c := newCluster(b, clusterOpts{timeout: 4 * time.Second})
	five(b, c)
	runs := max(b.N, 20)
	gaps := make([]time.Duration, 0, runs)
	b.ResetTimer()
	for i := range runs {
		cur := c.waitTerm(i, 5*time.Second)
		start := time.Now()
		if err := cur.replica.e.Resign(context.Background()); err != nil {
			b.Fatal(err)
		}
		next := c.waitTerm(i+1, 5*time.Second)
		gaps = append(gaps, next.start.Sub(start))
	}
	b.StopTimer()
	report(b, gaps, 0)
}

// BenchmarkHandoverKilledLeader: a killed leader process is modelled by
// black-holing its connection, so that its session must expire on the
// server (Client.Close would end it at once, which is the graceful case).
// Measured from the cut to the successor's lead call; expect about the
// session timeout plus the server's expiry tick plus detection.
func BenchmarkHandoverKilledLeader(b *testing.B) {
	const timeout = 2 * time.Second
	c := newCluster(b, clusterOpts{proxied: true, timeout: timeout})
	five(b, c)
	runs := max(b.N, 20)
	gaps := make([]time.Duration, 0, runs)
	b.ResetTimer()
	for i := range runs {
		cur := c.waitTerm(i, 5*time.Second)
		killed := cur.replica
		joined := killed.e.Stats().Candidacies
		start := time.Now()
		killed.proxy.Cut()
		next := c.waitTerm(i+1, 4*timeout)
		gaps = append(gaps, next.start.Sub(start))

		b.StopTimer() // bring the "restarted" replica back into the queue
		killed.proxy.Heal()
		eventually(b, 4*timeout, killed.name+" to rejoin", func() bool { return killed.e.Stats().Candidacies > joined })
		b.StartTimer()
	}
	b.StopTimer()
	report(b, gaps, timeout)
}

// report publishes the median, p90 and max handover in milliseconds, and
// with a session timeout, the median beyond it.
func report(b *testing.B, gaps []time.Duration, timeout time.Duration) {
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	n := len(gaps)
	b.ReportMetric(float64(sum)/float64(n), "ns/op")
	b.ReportMetric(ms(gaps[0]), "min-ms")
	b.ReportMetric(ms(gaps[n/2]), "median-ms")
	b.ReportMetric(ms(percentile(gaps, 0.9)), "p90-ms")
	b.ReportMetric(ms(gaps[n-1]), "max-ms")
	b.ReportMetric(float64(n), "handovers")
	if timeout > 0 {
		b.ReportMetric(ms(gaps[n/2]-timeout), "median-beyond-timeout-ms")
	}
	b.Logf("%d handovers: min %s, median %s, p90 %s, max %s", n, gaps[0], gaps[n/2], percentile(gaps, 0.9), gaps[n-1])
}

// percentile returns the p-quantile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}
