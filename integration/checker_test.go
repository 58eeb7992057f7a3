package integration

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Causes of a gap, as the checker explains them.
const (
	// GapRevalidation: the gap ends at a ceiling the primary stored, and
	// the next ID issued is that ceiling + 1: the reserve skipped when the
	// primary revalidated the sequence after a ZooKeeper leader election,
	// or restored it after a data loss.
	GapRevalidation = "reserve skipped at revalidation/restore"
	// GapCrash: the IDs just before the gap went to a worker or replica
	// that crashed later; the rest of its buffered batch died with it.
	GapCrash = "buffered at crash"
	// GapOther: anything else the protocol allows to be lost: a write whose
	// reply was lost, a window or buffer dropped after a session loss.
	GapOther = "other (lost reply, dropped window or buffer)"
)

// maxExamples caps the duplicates a Verdict lists in full.
const maxExamples = 20

// Gap is a run of IDs below the highest ID issued that no worker received.
type Gap struct {
	Seq        string
	Start, End int64
	Cause      string
	// Scenario is the scenario of the first range issued after the gap.
	Scenario string
}

// Len returns the number of IDs in the gap.
func (g Gap) Len() int64 { return g.End - g.Start + 1 }

// Duplicate is an overlap between two ranges: IDs handed out twice.
type Duplicate struct {
	Seq           string
	Start, End    int64
	First, Second Record
}

// String describes the duplicate with both calls, for the failure message.
func (d Duplicate) String() string {
	return fmt.Sprintf("sequence %s: IDs %d..%d (%d) issued twice:\n\t%s\n\t%s",
		d.Seq, d.Start, d.End, d.End-d.Start+1, describeRecord(d.First), describeRecord(d.Second))
}

func describeRecord(r Record) string {
	return fmt.Sprintf("[%d,%d] to %s via %s, call %s..%s, scenario %q",
		r.Start, r.End, r.Worker, r.Source, r.T0.Format("15:04:05.000"), r.T1.Format("15:04:05.000"), r.Scenario)
}

// Verdict is the checker's answer over a whole history.
type Verdict struct {
	Records int
	IDs     int64
	// Duplicates counts IDs found in more than one range (an ID in three
	// ranges counts twice). The only acceptable value is 0.
	Duplicates int64
	// Examples are the first duplicates found, with both calls.
	Examples []Duplicate
	Gaps     []Gap
	Lost     int64
	// DuplicateScenarios counts duplicate IDs by the scenario of the later
	// range.
	DuplicateScenarios map[string]int64
}

// Check sorts every sequence's ranges and reports overlaps (duplicates) and
// holes (lost IDs). It works on ranges, never on sets of IDs, so it costs
// O(n log n) in the number of calls, whatever their sizes.
func Check(s Snapshot) Verdict {
	v := Verdict{Records: len(s.Records), DuplicateScenarios: map[string]int64{}}
	crashes := map[string][]time.Time{}
	for _, e := range s.Events {
		if e.Kind == "crash" {
			crashes[e.Subject] = append(crashes[e.Subject], e.T)
		}
	}
	bySeq := map[string][]Record{}
	for _, r := range s.Records {
		bySeq[r.Seq] = append(bySeq[r.Seq], r)
		v.IDs += r.Len()
	}
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		recs := bySeq[seq]
		sort.Slice(recs, func(i, j int) bool {
			if recs[i].Start != recs[j].Start {
				return recs[i].Start < recs[j].Start
			}
			return recs[i].End < recs[j].End
		})
		// cover is the record reaching highest so far. Sequences start at 1.
		cover := Record{End: 0}
		for _, r := range recs {
			switch {
			case r.Start <= cover.End:
				end := min(r.End, cover.End)
				v.Duplicates += end - r.Start + 1
				v.DuplicateScenarios[r.Scenario] += end - r.Start + 1
				if len(v.Examples) < maxExamples {
					v.Examples = append(v.Examples, Duplicate{Seq: seq, Start: r.Start, End: end, First: cover, Second: r})
				}
			case r.Start > cover.End+1:
				g := Gap{Seq: seq, Start: cover.End + 1, End: r.Start - 1, Scenario: r.Scenario}
				g.Cause = explainGap(g, cover, s.Ceilings[seq], crashes)
				v.Gaps = append(v.Gaps, g)
				v.Lost += g.Len()
			}
			if r.End > cover.End {
				cover = r
			}
		}
	}
	return v
}

// ReportDuplicates fails t if any ID was handed out twice, listing the
// examples with both calls; the only acceptable count is 0.
func (v Verdict) ReportDuplicates(t testing.TB) {
	t.Helper()
	if v.Duplicates == 0 {
		return
	}
	var b strings.Builder
	for _, d := range v.Examples {
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	t.Errorf("%d IDs handed out twice (of %d checked):%s", v.Duplicates, v.IDs, b.String())
}

// explainGap says why the IDs of g, following the range of before, were
// never received.
func explainGap(g Gap, before Record, ceilings map[int64]bool, crashes map[string][]time.Time) string {
	if ceilings[g.End] {
		return GapRevalidation
	}
	for _, t := range crashes[before.Source] {
		if !t.Before(before.T1) {
			return GapCrash
		}
	}
	return GapOther
}

// Figures are the numbers reported for one scenario (or one fault of the
// mixed run).
type Figures struct {
	Scenario   string
	Elapsed    time.Duration
	Records    int
	IDs        int64
	Duplicates int64
	Gaps       int
	Lost       int64
	LostBy     map[string]int64
	// NoPrimaryMax is the longest time no reachable replica said it led;
	// NoPrimaryTotal sums all such times.
	NoPrimaryMax, NoPrimaryTotal time.Duration
	// MultiLeader counts polls in which two reachable replicas both said
	// they led (a leadership overlap; expected 0).
	MultiLeader int
	// BlockedGo and BlockedHTTP are the longest times a Go or HTTP worker
	// went between two successful calls, and the worker.
	BlockedGo, BlockedHTTP             time.Duration
	BlockedGoWorker, BlockedHTTPWorker string
	// Errors counts failed calls by kind.
	Errors map[string]int
}

// Figures computes the figures of scenario (records and gaps tagged with
// it, in v; "" for all) and of the time window [from, to] (primary polls,
// blocking, errors).
func (v Verdict) Figures(s Snapshot, scenario string, from, to time.Time) Figures {
	f := Figures{Scenario: scenario, Elapsed: to.Sub(from), LostBy: map[string]int64{}, Errors: map[string]int{}}
	if scenario == "" {
		f.Scenario = "all"
		f.Duplicates = v.Duplicates
	} else {
		f.Duplicates = v.DuplicateScenarios[scenario]
	}
	for _, r := range s.Records {
		if scenario == "" || r.Scenario == scenario {
			f.Records++
			f.IDs += r.Len()
		}
	}
	for _, g := range v.Gaps {
		if scenario == "" || g.Scenario == scenario {
			f.Gaps++
			f.Lost += g.Len()
			f.LostBy[g.Cause] += g.Len()
		}
	}
	// Time without a primary, from the polls.
	var noneSince time.Time
	closeRun := func(t time.Time) {
		if !noneSince.IsZero() {
			d := t.Sub(noneSince)
			f.NoPrimaryTotal += d
			f.NoPrimaryMax = max(f.NoPrimaryMax, d)
			noneSince = time.Time{}
		}
	}
	for _, p := range s.Samples {
		if p.T.Before(from) || p.T.After(to) {
			continue
		}
		switch {
		case len(p.Leaders) == 0 && noneSince.IsZero():
			noneSince = p.T
		case len(p.Leaders) > 0:
			closeRun(p.T)
		}
		if len(p.Leaders) > 1 {
			f.MultiLeader++
		}
	}
	closeRun(to)
	// Blocking: the longest gap between two successful calls of a worker
	// that ends in the window.
	last := map[string]time.Time{}
	recs := append([]Record(nil), s.Records...)
	sort.Slice(recs, func(i, j int) bool { return recs[i].T1.Before(recs[j].T1) })
	for _, r := range recs {
		prev, ok := last[r.Worker]
		last[r.Worker] = r.T1
		if !ok || r.T1.Before(from) || r.T1.After(to) {
			continue
		}
		d := r.T1.Sub(prev)
		if strings.HasPrefix(r.Worker, "http") {
			if d > f.BlockedHTTP {
				f.BlockedHTTP, f.BlockedHTTPWorker = d, r.Worker
			}
		} else if d > f.BlockedGo {
			f.BlockedGo, f.BlockedGoWorker = d, r.Worker
		}
	}
	for _, e := range s.Events {
		if e.Kind == "error" && !e.T.Before(from) && !e.T.After(to) {
			f.Errors[e.Detail]++
		}
	}
	return f
}

// String formats the figures on one line.
func (f Figures) String() string {
	var lost []string
	for _, cause := range slices.Sorted(maps.Keys(f.LostBy)) {
		lost = append(lost, fmt.Sprintf("%d %s", f.LostBy[cause], cause))
	}
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(f.Errors)) {
		errs = append(errs, fmt.Sprintf("%s=%d", k, f.Errors[k]))
	}
	return fmt.Sprintf("%-34s %6.1fs  IDs %9d in %6d ranges  duplicates %d  lost %d in %d gaps [%s]  no primary max %.1fs total %.1fs  two leaders %d  blocked go %.1fs (%s) http %.1fs (%s)  errors [%s]",
		f.Scenario, f.Elapsed.Seconds(), f.IDs, f.Records, f.Duplicates, f.Lost, f.Gaps, strings.Join(lost, ", "),
		f.NoPrimaryMax.Seconds(), f.NoPrimaryTotal.Seconds(), f.MultiLeader,
		f.BlockedGo.Seconds(), f.BlockedGoWorker, f.BlockedHTTP.Seconds(), f.BlockedHTTPWorker, strings.Join(errs, " "))
}
