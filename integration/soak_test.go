package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestSoak is the chaos suite for hours: three replicas, the workers over
// the library and HTTP, the faults drawn at random as TestChaosMixed draws
// them, and the primary's store audit and compaction at their defaults. It
// samples each replica's resident memory, goroutines, open files and
// ZooKeeper watches, and the store's objects and bytes, and fails on a
// leak (soakLeaks) as well as on any ID handed out twice.
//
// It runs only when SEQKEEPER_SOAK_DURATION is set (an hour is the
// useful least: bash scripts/soak.sh 1h). SEQKEEPER_SOAK_SAMPLE sets the
// sampling interval (default 15s). Between two faults the cluster runs
// quietly for 2 to 9 times SEQKEEPER_SOAK_QUIET (default 10s: about a
// minute, where TestChaosMixed waits 2 to 9 seconds), so that a replica's
// process lives long enough for its series to be judged.
// SEQKEEPER_CHAOS_SEED and SEQKEEPER_CHAOS_FAULTS work as for
// TestChaosMixed.
func TestSoak(t *testing.T) {
	if os.Getenv("SEQKEEPER_SOAK_DURATION") == "" {
		t.Skip("the soak runs only with SEQKEEPER_SOAK_DURATION set: bash scripts/soak.sh 1h")
	}
	takeClusterSlot(t)
	duration := envDuration(t, "SEQKEEPER_SOAK_DURATION", time.Hour)
	every := envDuration(t, "SEQKEEPER_SOAK_SAMPLE", 15*time.Second)
	quiet := envDuration(t, "SEQKEEPER_SOAK_QUIET", 10*time.Second)
	seed := mixedSeed(t)
	// lose-store-objects waits two minutes for the audit to persist the
	// lost ceilings again: the default audit runs every five.
	var eligible []fault
	for _, f := range mixedFaults(t, faults) {
		if f.name != "lose-store-objects" {
			eligible = append(eligible, f)
		}
	}
	opts := chaosOptions()
	delete(opts.ReplicaEnv, "SEQKEEPER_AUDIT_INTERVAL")
	opts.ZooKeeperEnv = map[string]string{"ZOO_4LW_COMMANDS_WHITELIST": "srvr,ruok,mntr,stat,conf,cons,wchc"}
	ctx, cancel := context.WithTimeout(context.Background(), duration+30*time.Minute)
	defer cancel()
	start := time.Now()
	ch := newChaos(ctx, t, seed, opts)
	s := &soakSampler{c: ch.c, s3: newS3Client(ch.c.MinIOEndpoint()), http: &http.Client{Timeout: 5 * time.Second}}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.run(sctx, every) })
	ch.mixed(ctx, t, seed, eligible, start.Add(duration), quiet)
	stop()
	wg.Wait()
	series := s.series()
	t.Logf("soak: %s, a sample every %s; each series after the first tenth of the run (the load's warm-up):\n%s",
		time.Since(start).Round(time.Second), every, soakTable(series, start, duration))
	for _, leak := range soakLeaks(series, start.Add(duration/10)) {
		t.Errorf("leak: %s", leak)
	}
}

// soakPoint is one sample of a series; run tells the runs of one process
// apart (a replica's process start time: a restarted replica starts a new
// run, whose figures are not compared with the old one's).
type soakPoint struct {
	t   time.Time
	v   float64
	run float64
}

// soakSampler samples the figures TestSoak judges.
type soakSampler struct {
	c    *Cluster
	s3   *s3.Client
	http *http.Client

	mu  sync.Mutex
	all map[string][]soakPoint // by series name, "seqkeeper1 goroutines"
}

func (s *soakSampler) add(name string, p soakPoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = map[string][]soakPoint{}
	}
	s.all[name] = append(s.all[name], p)
}

func (s *soakSampler) series() map[string][]soakPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.all)
}

// run samples every interval until ctx ends. A figure that cannot be read
// at a sample (a replica down, a ZooKeeper server restarting) is left out
// of that sample.
func (s *soakSampler) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		sessions := map[uint64]soakReplica{}
		for _, r := range s.c.Replicas() {
			if sid, run, ok := s.sampleReplica(ctx, r, now); ok {
				sessions[sid] = soakReplica{r.Name, run}
			}
		}
		s.watches(ctx, sessions, now)
		s.sampleStore(ctx, now)
	}
}

// soakReplica is a replica as one sample found it: its name and its
// process start time.
type soakReplica struct {
	name string
	run  float64
}

// processFigures are the replica's /metrics lines TestSoak samples, by the
// series name they get.
var processFigures = map[string]string{
	"process_resident_memory_bytes": "rss-bytes",
	"go_goroutines":                 "goroutines",
	"process_open_fds":              "open-files",
}

// sampleReplica samples r's process figures, and returns its ZooKeeper
// session and its process start time.
func (s *soakSampler) sampleReplica(ctx context.Context, r *Node, now time.Time) (sid uint64, run float64, ok bool) {
	st, err := getStatus(ctx, s.http, r)
	if err != nil {
		return 0, 0, false
	}
	sid, err = strconv.ParseUint(strings.TrimPrefix(st.ZooKeeperSession, "0x"), 16, 64)
	if err != nil || sid == 0 {
		return 0, 0, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr(ReplicaPort)+"/metrics", nil)
	if err != nil {
		return 0, 0, false
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, false
	}
	value := func(name string) (float64, bool) {
		ms := fams[name].GetMetric()
		if len(ms) != 1 {
			return 0, false
		}
		return ms[0].GetGauge().GetValue(), true
	}
	run, ok = value("process_start_time_seconds")
	got := map[string]float64{}
	for metric := range processFigures {
		v, found := value(metric)
		ok = ok && found
		got[metric] = v
	}
	if !ok {
		return 0, 0, false
	}
	for metric, series := range processFigures {
		s.add(r.Name+" "+series, soakPoint{now, got[metric], run})
	}
	return sid, run, true
}

// watches samples, for each replica in sessions (by ZooKeeper session),
// the watches ZooKeeper holds for it, summed over every server (wchc
// lists each server's own sessions). A sample is kept only when every
// server answered.
func (s *soakSampler) watches(ctx context.Context, sessions map[uint64]soakReplica, now time.Time) {
	count := map[uint64]int{}
	for _, zk := range s.c.ZooKeepers {
		out, err := zkclient.FourLetterWord(ctx, zk.Addr(ZooKeeperPort), "wchc")
		if err != nil {
			return
		}
		var sid uint64
		for line := range strings.Lines(out) {
			switch {
			case strings.HasPrefix(line, "0x"):
				sid, _ = strconv.ParseUint(strings.TrimSpace(line[2:]), 16, 64)
			case strings.HasPrefix(line, "\t") && sid != 0:
				count[sid]++
			}
		}
	}
	for sid, r := range sessions {
		s.add(r.name+" zookeeper-watches", soakPoint{now, float64(count[sid]), r.run})
	}
}

// sampleStore samples the number and bytes of the store's objects.
func (s *soakSampler) sampleStore(ctx context.Context, now time.Time) {
	prefix := s.c.StorePrefix() + "/"
	pages := s3.NewListObjectsV2Paginator(s.s3, &s3.ListObjectsV2Input{Bucket: aws.String(StoreBucket), Prefix: aws.String(prefix)})
	var n, bytes float64
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return
		}
		for _, o := range page.Contents {
			n++
			bytes += float64(aws.ToInt64(o.Size))
		}
	}
	s.add("store objects", soakPoint{now, n, 0})
	s.add("store bytes", soakPoint{now, bytes, 0})
}

// soakSlack is how far a series may rise from its first quarter to its
// last before a steady rise is a leak: a fraction of the first quarter's
// median plus a floor, by the series' kind (its name's last word).
var soakSlack = map[string]struct{ frac, floor float64 }{
	"rss-bytes":         {0.25, 16 << 20},
	"goroutines":        {0.10, 20},
	"open-files":        {0.10, 10},
	"zookeeper-watches": {0.10, 20},
	"objects":           {0.25, 50},
	"bytes":             {0.25, 1 << 20},
}

// soakLeaks judges each run of each series from steady on: it is a leak
// when the medians of its four quarters rise one after another and the
// last exceeds the first by more than the series' slack. A run shorter
// than half of the steady time is not judged (a replica restarted late).
func soakLeaks(all map[string][]soakPoint, steady time.Time) []string {
	var end time.Time
	for _, ps := range all {
		if n := len(ps); n > 0 && ps[n-1].t.After(end) {
			end = ps[n-1].t
		}
	}
	var leaks []string
	for _, name := range slices.Sorted(maps.Keys(all)) {
		for _, run := range soakRuns(all[name], steady) {
			q := soakQuarters(run)
			if q == nil || run[len(run)-1].t.Sub(run[0].t) < end.Sub(steady)/2 {
				continue
			}
			slack := soakSlack[name[strings.LastIndex(name, " ")+1:]]
			if q[0] < q[1] && q[1] < q[2] && q[2] < q[3] && q[3] > q[0]*(1+slack.frac)+slack.floor {
				leaks = append(leaks, fmt.Sprintf("%s rose steadily: medians by quarter %.0f, %.0f, %.0f, %.0f (%s to %s)",
					name, q[0], q[1], q[2], q[3], run[0].t.Format(time.TimeOnly), run[len(run)-1].t.Format(time.TimeOnly)))
			}
		}
	}
	return leaks
}

// soakRuns splits a series' points from steady on into its process runs.
func soakRuns(points []soakPoint, steady time.Time) [][]soakPoint {
	var runs [][]soakPoint
	for _, p := range points {
		if p.t.Before(steady) {
			continue
		}
		if n := len(runs); n == 0 || runs[n-1][0].run != p.run {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], p)
	}
	return runs
}

// soakQuarters returns the medians of the four quarters of run, or nil
// when it has fewer than eight points.
func soakQuarters(run []soakPoint) []float64 {
	if len(run) < 8 {
		return nil
	}
	q := make([]float64, 4)
	for i := range q {
		part := run[i*len(run)/4 : (i+1)*len(run)/4]
		vs := make([]float64, len(part))
		for j, p := range part {
			vs[j] = p.v
		}
		sort.Float64s(vs)
		q[i] = vs[len(vs)/2]
	}
	return q
}

// soakTable prints each series from a tenth of the run on: its samples,
// runs (restarts + 1), least and greatest value, and its longest run's
// medians by quarter.
func soakTable(all map[string][]soakPoint, start time.Time, duration time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %7s %4s %14s %14s   %s\n", "series", "samples", "runs", "least", "greatest", "longest run's medians by quarter")
	for _, name := range slices.Sorted(maps.Keys(all)) {
		runs := soakRuns(all[name], start.Add(duration/10))
		least, most, samples := 0.0, 0.0, 0
		var longest []soakPoint
		for _, run := range runs {
			for _, p := range run {
				if samples == 0 || p.v < least {
					least = p.v
				}
				most = max(most, p.v)
				samples++
			}
			if len(run) > len(longest) {
				longest = run
			}
		}
		fmt.Fprintf(&b, "%-34s %7d %4d %14.0f %14.0f   %.0f\n", name, samples, len(runs), least, most, soakQuarters(longest))
	}
	return b.String()
}
