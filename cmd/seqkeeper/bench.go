package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// benchResult is what bench measures; "bench -o json" prints it as one line.
type benchResult struct {
	Sequence        string  `json:"sequence"`
	Clients         int     `json:"clients"`
	Batch           int64   `json:"batch"`
	DurationSeconds float64 `json:"duration_seconds"`
	IDs             int64   `json:"ids"`
	IDsPerSecond    float64 `json:"ids_per_second"`
	Takes           int64   `json:"takes"`
	TakesPerSecond  float64 `json:"takes_per_second"`
	// ZKRequests counts ZooKeeper round trips during the run, over every
	// client; RoundTripsPerID divides them by the IDs taken.
	ZKRequests      int64   `json:"zk_requests"`
	RoundTripsPerID float64 `json:"round_trips_per_id"`
	Conflicts       int64   `json:"cas_conflicts"`
	Retries         int64   `json:"retries"`
	// Waits counts the times a take waited for the primary (at the
	// ceiling, or for a validation or a restore).
	Waits int64 `json:"waits"`
	// Latency of one take, in seconds.
	Latency struct {
		P50  float64 `json:"p50"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p999"`
		Max  float64 `json:"max"`
	} `json:"latency_seconds"`
	// Duplicates counts IDs handed out more than once: anything but 0 is a
	// bug.
	Duplicates int64 `json:"duplicates"`
	// InitWaitSeconds is how long bench waited, before the run, for the
	// primary to initialise a sequence just created.
	InitWaitSeconds float64 `json:"init_wait_seconds"`
}

// initPoll is how often bench looks whether a new sequence is initialised.
const initPoll = 10 * time.Millisecond

// waitInitialised waits until the primary has initialised sequence name
// (right after 'seqkeeper create' it is a registration, and takes wait for
// the primary's first store write), so that the run measures takes, not
// that one write; it gives up after limit (the ceiling wait). It returns
// how long it waited.
func waitInitialised(ctx context.Context, seqs *seqzk.Client, name string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		d, err := httpapi.DescribeSequence(ctx, seqs, name)
		switch {
		case err != nil:
			return time.Since(start), err
		case d.Kind != httpapi.KindUninitialised:
			return time.Since(start), nil
		case time.Since(start) > limit:
			return time.Since(start), fmt.Errorf("sequence %q: %w: not initialised after %s: no primary has picked it up; is 'seqkeeper serve' running against the same ZooKeeper and root?",
				name, seqzk.ErrCeilingReached, limit)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(initPoll):
		}
	}
}

func newBenchCmd(g *globals) *cobra.Command {
	var (
		clients  int
		batch    int64
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench NAME",
		Short: "Load-test a sequence: clients taking batches of IDs for a while",
		Long: `Run --clients clients, each with its own ZooKeeper session, taking batches
of --batch IDs from sequence NAME by compare-and-set for --duration, and
print IDs/s, takes/s, ZooKeeper round trips per ID, take latency percentiles
and a duplicate check. The IDs taken are used up: bench a sequence made for
it, with 'seqkeeper serve' running so that the ceiling keeps rising. The
clock starts once the primary has initialised the sequence (one created
just before waits for the primary's first store write; bench says how
long).`,
		Example: "  seqkeeper create bench && seqkeeper bench bench --clients 8 --batch 100 --duration 10s",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			switch {
			case clients < 1 || clients > 1000:
				return usagef("--clients %d: want 1 to 1000", clients)
			case batch < 1 || batch > 1_000_000:
				return usagef("--batch %d: want 1 to 1000000", batch)
			case duration <= 0 || duration > 24*time.Hour:
				return usagef("--duration %s: want more than 0 and at most 24h", duration)
			}
			res, err := g.bench(cmd.Context(), name, clients, batch, duration)
			if res != nil {
				if g.jsonOutput() {
					if perr := g.printJSON(res); perr != nil {
						return perr
					}
				} else {
					g.printBench(res)
				}
			}
			return err
		},
	}
	cmd.Flags().IntVar(&clients, "clients", 4, "concurrent clients, each with its own ZooKeeper session")
	cmd.Flags().Int64Var(&batch, "batch", 100, "IDs per take")
	cmd.Flags().DurationVar(&duration, "duration", 10*time.Second, "how long to run")
	return cmd
}

// benchClient is one client's session and measurements.
type benchClient struct {
	zk     *zkclient.Client
	seqs   *seqzk.Client
	before seqzk.Stats
	lat    []time.Duration
	got    []sequence.Range
	err    error
}

// bench runs the load and returns what it measured, with an error if a
// take failed (the result then covers the run up to the failure).
func (g *globals) bench(ctx context.Context, name string, clients int, batch int64, duration time.Duration) (*benchResult, error) {
	log := g.logger(cliLogLevel)
	cs := make([]*benchClient, clients)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.zk.Close()
			}
		}
	}()
	for i := range cs {
		zc, err := dialZK(ctx, g.cfg, log)
		if err != nil {
			return nil, err
		}
		cs[i] = &benchClient{zk: zc}
		if cs[i].seqs, err = newSequenceClient(zc, g.cfg); err != nil {
			return nil, err
		}
	}
	initWait, err := waitInitialised(ctx, cs[0].seqs, name, g.cfg.CeilingWait)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		c.before = c.seqs.Stats()
	}

	runCtx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(runCtx, cancel, name, batch)
		}()
	}
	wg.Wait()
	res := &benchResult{Sequence: name, Clients: clients, Batch: batch, InitWaitSeconds: initWait.Seconds()}
	errs := res.tally(cs, time.Since(start))
	switch {
	case len(errs) > 0:
		return res, fmt.Errorf("bench stopped early: %w", errors.Join(errs...))
	case res.Duplicates > 0:
		return res, fmt.Errorf("%d IDs were handed out more than once: this is a bug, please report it", res.Duplicates)
	case res.IDs == 0 && ctx.Err() == nil && res.Waits > 0:
		return res, fmt.Errorf("no IDs taken in %s: sequence %q is at its ceiling; is 'seqkeeper serve' running and reaching its store?", duration, name)
	case res.IDs == 0 && ctx.Err() == nil:
		return res, fmt.Errorf("no take finished in %s (%d ZooKeeper requests sent, none waiting for the primary): ZooKeeper is too slow for so short a run; give a longer --duration", duration, res.ZKRequests)
	}
	return res, ctx.Err()
}

// run takes batches of name until ctx is done, recording each take's
// latency and IDs. A failure is kept in c.err and ends the run for every
// client (cancel); a take cut short by the end of the run is no failure.
func (c *benchClient) run(ctx context.Context, cancel context.CancelFunc, name string, batch int64) {
	for ctx.Err() == nil {
		t0 := time.Now()
		rs, err := c.seqs.Take(ctx, name, batch)
		if err != nil {
			if ctx.Err() == nil {
				c.err = err
				cancel() // one failure ends the run for all
			}
			return
		}
		c.lat = append(c.lat, time.Since(t0))
		c.got = append(c.got, rs...)
	}
}

// tally fills in res from the clients' runs over elapsed: takes, IDs,
// duplicates, rates, ZooKeeper requests and retries since each client's
// before, and latency percentiles. It returns the clients' errors.
func (res *benchResult) tally(cs []*benchClient, elapsed time.Duration) []error {
	res.DurationSeconds = elapsed.Seconds()
	var lat []time.Duration
	var all []sequence.Range
	var errs []error
	for _, c := range cs {
		lat = append(lat, c.lat...)
		all = append(all, c.got...)
		after := c.seqs.Stats()
		res.ZKRequests += after.Requests - c.before.Requests
		res.Conflicts += after.Conflicts - c.before.Conflicts
		res.Retries += after.Retries - c.before.Retries
		res.Waits += after.Waits - c.before.Waits
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	res.Takes = int64(len(lat))
	res.IDs = sequence.Ranges(all).Count()
	res.Duplicates = duplicates(all)
	res.IDsPerSecond = float64(res.IDs) / elapsed.Seconds()
	res.TakesPerSecond = float64(res.Takes) / elapsed.Seconds()
	if res.IDs > 0 {
		res.RoundTripsPerID = float64(res.ZKRequests) / float64(res.IDs)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) float64 { return lat[min(len(lat)-1, int(float64(len(lat))*p))].Seconds() }
		res.Latency.P50, res.Latency.P99, res.Latency.P999 = pct(0.50), pct(0.99), pct(0.999)
		res.Latency.Max = lat[len(lat)-1].Seconds()
	}
	return errs
}

// duplicates counts IDs that appear in more than one of rs.
func duplicates(rs []sequence.Range) int64 {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b sequence.Range) int { return cmp.Compare(a.Start, b.Start) })
	var dup, reach int64
	for i, r := range rs {
		if i > 0 && r.Start <= reach {
			dup += sequence.Range{Start: r.Start, End: min(r.End, reach)}.Len()
		}
		if i == 0 || r.End > reach {
			reach = r.End
		}
	}
	return dup
}

func (g *globals) printBench(r *benchResult) {
	ms := func(s float64) string {
		d := time.Duration(s * float64(time.Second))
		return d.Round(max(time.Microsecond, d/1000)).String()
	}
	fmt.Fprintf(g.stdout, "bench %s: %d clients, batch %d, %.1fs\n", r.Sequence, r.Clients, r.Batch, r.DurationSeconds)
	if r.InitWaitSeconds >= 0.05 {
		fmt.Fprintf(g.stdout, "  (waited %s for the primary to initialise %s before the run)\n",
			ms(r.InitWaitSeconds), r.Sequence)
	}
	fmt.Fprintf(g.stdout, "  IDs:             %d (%.0f/s)\n", r.IDs, r.IDsPerSecond)
	fmt.Fprintf(g.stdout, "  takes:           %d (%.0f/s)\n", r.Takes, r.TakesPerSecond)
	fmt.Fprintf(g.stdout, "  ZK round trips:  %.4f per ID (%d requests, %d CAS conflicts, %d retries)\n",
		r.RoundTripsPerID, r.ZKRequests, r.Conflicts, r.Retries)
	if r.Waits > 0 {
		fmt.Fprintf(g.stdout, "  waited for the primary %d times (at the ceiling, or for a validation or restore)\n", r.Waits)
	}
	fmt.Fprintf(g.stdout, "  take latency:    p50 %s  p99 %s  p99.9 %s  max %s\n",
		ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999), ms(r.Latency.Max))
	fmt.Fprintf(g.stdout, "  duplicate IDs:   %d\n", r.Duplicates)
}
