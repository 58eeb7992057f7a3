package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/apitest"
)

// The rolling upgrade test's checks: each replica's store, the primary's
// raises, and the verdict over the whole history.

// checkStore waits for n's own first store check and records a refusal of
// a newer format; any other store error fails the test.
func (u *upgrade) checkStore(ctx context.Context, n *Node, rel release) {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := getStatus(ctx, client, n)
		switch {
		case err == nil && st.Store.LastRequest != "" && st.Store.Healthy:
			return
		case err == nil && st.Store.LastRequest != "":
			if !newerFormat.MatchString(st.Store.Error) {
				u.t.Errorf("%s (%s): store unhealthy: %s", n.Name, rel.Version, st.Store.Error)
				return
			}
			u.refused(n, rel, st.Store.Error)
			return
		case time.Now().After(deadline):
			u.t.Errorf("%s (%s): no store check within 30 s (last status error %v)", n.Name, rel.Version, err)
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// versionNamed matches a format version in a refusal ("... v3 ...").
var versionNamed = regexp.MustCompile(`\bv[0-9]+\b`)

// refused records that a replica of rel refused the store; the message
// must name the version it would need.
func (u *upgrade) refused(n *Node, rel release, msg string) {
	u.mu.Lock()
	u.refusals = append(u.refusals, fmt.Sprintf("%s (%s): %s", n.Name, rel.Version, msg))
	u.mu.Unlock()
	u.hist.Event("note", n.Name, "refused the store: "+msg)
	u.t.Logf("ROLLBACK REFUSED: %s (%s) cannot read the store this tree wrote: %s", n.Name, rel.Version, msg)
	if !versionNamed.MatchString(msg) {
		u.t.Errorf("%s (%s) refuses the store without naming the version it needs: %s", n.Name, rel.Version, msg)
	}
}

// leaderEpoch notes the leader epoch the primary reports, before it is
// replaced.
func (u *upgrade) leaderEpoch(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	p, err := u.w.Primary(pctx)
	if err == nil {
		var st *replicaStatus
		if st, err = getStatus(pctx, &http.Client{Timeout: 5 * time.Second}, p); err == nil && st.Reserve != nil {
			u.epoch = max(u.epoch, st.Reserve.Epoch)
			return
		}
	}
	u.t.Errorf("the leader epoch before replacing the primary: %v", err)
}

// primaryRuns says whether the primary runs rel.
func (u *upgrade) primaryRuns(ctx context.Context, rel release) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	p, err := u.w.Primary(pctx)
	return err == nil && u.runs(p, rel)
}

// awaitTakeover waits until a primary of rel has advanced the leader epoch
// past every epoch seen before (a store write: every primary starts with
// one; checkRaise then waits for its first raise), or until a replica of rel logs that it refuses the store: then it
// returns the refusal. The handover is graceful, so it must come within
// seconds; the bound is half a runway, when takes would start waiting.
func (u *upgrade) awaitTakeover(ctx context.Context, rel release) (refusal string) {
	t0 := time.Now()
	client := &http.Client{Timeout: 2 * time.Second}
	for i := 0; time.Since(t0) < upgradeRunway/2 && ctx.Err() == nil; i++ {
		for _, n := range u.rot.in() {
			st, err := getStatus(ctx, client, n)
			if err == nil && st.Leading && st.Replica.Version == rel.Version && st.Reserve != nil && st.Reserve.Epoch > u.epoch {
				u.t.Logf("%s (%s) leads, leader epoch %d (before: %d), %.1fs after the handover", n.Name, rel.Version, st.Reserve.Epoch, u.epoch, time.Since(t0).Seconds())
				u.epoch = st.Reserve.Epoch
				u.expectRaise(n, rel, st)
				return ""
			}
		}
		if i%4 == 0 {
			for _, n := range u.rot.in() {
				if msg := u.refusalLogged(ctx, n, rel); msg != "" {
					return msg
				}
			}
		}
		sleep(ctx, 500*time.Millisecond)
	}
	u.t.Errorf("no primary of %s took over within %s", rel.Version, upgradeRunway/2)
	return ""
}

// refusalLogged returns the first line in which n, if it runs rel, says it
// refuses the store for its newer format (the error of a JSON line), and
// records the refusal.
func (u *upgrade) refusalLogged(ctx context.Context, n *Node, rel release) string {
	if !u.runs(n, rel) {
		return ""
	}
	out, err := n.Logs(ctx)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(out, "\n") {
		if !newerFormat.MatchString(l) {
			continue
		}
		var line struct {
			Error string `json:"error"`
		}
		msg := l
		if json.Unmarshal([]byte(l), &line) == nil && line.Error != "" {
			msg = line.Error
		}
		u.refused(n, rel, msg)
		return msg
	}
	return ""
}

// raiseCheck is a primary's first raise, looked for later: the stored
// ceilings it reported on taking over.
type raiseCheck struct {
	rel     release
	primary string
	since   time.Time
	before  map[string]int64
}

// expectRaise notes the stored ceilings that st, the status of the
// primary n of rel that just took over, reports: checkRaise looks for one
// of them to rise.
func (u *upgrade) expectRaise(n *Node, rel release, st *replicaStatus) {
	rc := &raiseCheck{rel: rel, primary: n.Name, since: time.Now(), before: map[string]int64{}}
	for _, s := range st.Reserve.Sequences {
		rc.before[s.Name] = s.StoredCeiling
	}
	u.raise = rc
}

// checkRaise checks that the primary that last took over has stored a
// raise, the store write of every busy sequence: it runs before that
// primary is replaced and at the end, so the wait overlaps the holds. A
// raise is due once a sequence has half a runway of demand left or less
// (a predecessor may have left a reserve of several runways): until then
// no raise is no fault; from then on it must come within half a runway.
func (u *upgrade) checkRaise(ctx context.Context) {
	rc := u.raise
	if rc == nil {
		return
	}
	u.raise = nil
	client := &http.Client{Timeout: 2 * time.Second}
	var due time.Time
	start := time.Now()
	for ctx.Err() == nil && (!due.IsZero() || time.Since(start) < upgradeRunway/2) {
		for _, n := range u.rot.in() {
			st, err := getStatus(ctx, client, n)
			if err != nil || !st.Leading || st.Reserve == nil {
				continue
			}
			if st.Replica.Version != rc.rel.Version {
				u.t.Errorf("%s (%s) leads, not a replica of %s: a handover nobody asked for", n.Name, st.Replica.Version, rc.rel.Version)
				return
			}
			shortest := math.Inf(1)
			for _, s := range st.Reserve.Sequences {
				if s.StoredCeiling > rc.before[s.Name] {
					u.t.Logf("the primary %s (%s) stored a raise within %.1fs of taking over: %s %d -> %d",
						n.Name, rc.rel.Version, time.Since(rc.since).Seconds(), s.Name, rc.before[s.Name], s.StoredCeiling)
					return
				}
				shortest = min(shortest, s.RunwaySeconds)
			}
			if shortest > (upgradeRunway/2 + 5*time.Second).Seconds() {
				u.t.Logf("the primary %s (%s) stored no raise in %.1fs and none is due: the shortest runway left is %.0fs",
					n.Name, rc.rel.Version, time.Since(rc.since).Seconds(), shortest)
				return
			}
			if due.IsZero() {
				due = time.Now()
			}
		}
		if !due.IsZero() && time.Since(due) > upgradeRunway/2 {
			break
		}
		sleep(ctx, time.Second)
	}
	if due.IsZero() {
		u.t.Errorf("no primary of %s answered within %s", rc.rel.Version, upgradeRunway/2)
		return
	}
	u.t.Errorf("the primary %s (%s) stored no raise within %s of taking over, %s after one was due (stored ceilings then: %v)",
		rc.primary, rc.rel.Version, time.Since(rc.since).Round(time.Second), time.Since(due).Round(time.Second), rc.before)
}

// kindStats are the figures of one kind of worker.
type kindStats struct {
	ids, ranges int64
	longest     time.Duration // the longest call (allocators: run)
	longestBy   string
}

// kindOf names the kind of worker that received r: the library of either
// release, or HTTP through a replica of either release.
func (u *upgrade) kindOf(r Record) string {
	switch {
	case strings.HasPrefix(r.Worker, "go-"+u.old.Name+"-"):
		return "library " + u.old.Version + " (" + u.old.Name + ")"
	case strings.HasPrefix(r.Worker, "go-"+u.cur.Name+"-"):
		return "library " + u.cur.Version + " (" + u.cur.Name + ")"
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return "HTTP via replicas of " + u.version[r.Source]
}

// longestCall returns the longest call of phase (all phases for "") and
// its worker. An allocator's record is a run of single IDs (up to 200 ms
// of them, see readWorker): its length bounds its calls from above.
func longestCall(s Snapshot, phase string) (time.Duration, string) {
	var d time.Duration
	who := ""
	for _, r := range s.Records {
		if (phase == "" || r.Scenario == phase) && r.T1.Sub(r.T0) > d {
			d, who = r.T1.Sub(r.T0), r.Worker
		}
	}
	return d, who
}

// verdict checks the whole history and logs the figures: per phase, per
// kind of worker, and the refusals seen.
func (u *upgrade) verdict(elapsed time.Duration) {
	t := u.t
	snap := u.hist.Snapshot()
	v := Check(snap)
	allowed := map[string]bool{}
	var b strings.Builder
	for _, p := range u.phases {
		f := v.Figures(snap, p.name, p.from, p.to)
		longest, who := longestCall(snap, p.name)
		fmt.Fprintf(&b, "\n%s  longest call %.2fs (%s)", f, longest.Seconds(), who)
		if p.allowFailures {
			allowed[p.name] = true
			b.WriteString("  [no replica could write the store: failures expected]")
			continue
		}
		failed := 0
		for _, k := range f.Errors {
			failed += k
		}
		if failed > 0 {
			t.Errorf("%s: %d calls failed %v; none may while a replica can write the store", p.name, failed, f.Errors)
		}
		if f.NoPrimaryMax >= upgradeRunway/2 {
			t.Errorf("%s: no primary for %.1fs, half the runway or more: takes may have waited at their ceilings", p.name, f.NoPrimaryMax.Seconds())
		}
		// Two elections (replicas of the two releases on different
		// election paths) would show two leaders poll after poll; one
		// poll can catch a handover's two ends.
		if f.MultiLeader > 2 {
			t.Errorf("%s: two replicas said they led in %d polls: more than one election?", p.name, f.MultiLeader)
		}
		if longest > upgradeCeilingWait {
			t.Errorf("%s: a call of %s lasted %.2fs, longer than ceiling_wait (%s)", p.name, who, longest.Seconds(), upgradeCeilingWait)
		}
	}
	t.Logf("rolling upgrade, by phase:%s", b.String())

	kinds := map[string]*kindStats{}
	var longest time.Duration
	for _, r := range snap.Records {
		k := kinds[u.kindOf(r)]
		if k == nil {
			k = &kindStats{}
			kinds[u.kindOf(r)] = k
		}
		k.ids += r.Len()
		k.ranges++
		if d := r.T1.Sub(r.T0); d > k.longest {
			k.longest, k.longestBy = d, r.Worker
		}
		if d := r.T1.Sub(r.T0); d > longest && !allowed[r.Scenario] {
			longest = d
		}
	}
	b.Reset()
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		k := kinds[name]
		fmt.Fprintf(&b, "\n%-40s IDs %9d in %6d ranges, longest call %.2fs (%s)", name, k.ids, k.ranges, k.longest.Seconds(), k.longestBy)
	}
	back := " and back"
	if u.sc.UpgradeOnly {
		back = ""
	}
	t.Logf("rolling upgrade from %s to %s%s in %s, by kind of worker:%s", u.old, u.cur, back, elapsed.Round(time.Second), b.String())
	t.Logf("IDs checked %d in %d ranges; duplicates %d; lost %d in %d gaps; longest call where a replica could write the store %.2fs (bound: ceiling_wait %s)",
		v.IDs, v.Records, v.Duplicates, v.Lost, len(v.Gaps), longest.Seconds(), upgradeCeilingWait)
	if len(u.refusals) > 0 {
		t.Logf("ROLLBACK to %s REFUSED; the earlier release said:\n\t%s%s", u.old.Version, strings.Join(u.refusals, "\n\t"), u.oldReplicaLogs())
	} else if !u.sc.UpgradeOnly {
		t.Logf("rollback to %s completed: its primary advanced the epoch and stored raises over the store this tree wrote", u.old.Version)
	}
	u.contractReport()
	v.ReportDuplicates(t)
	for _, r := range u.w.Races() {
		t.Errorf("data race in a Go worker process: %s", r)
	}
}

// oldReplicaLogs returns, per replica of the earlier release, how many of
// its log lines name a newer format, and the first of them.
func (u *upgrade) oldReplicaLogs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, n := range u.c.Replicas() {
		if !u.runs(n, u.old) {
			continue
		}
		out, err := n.Logs(ctx)
		if err != nil {
			continue
		}
		var hits []string
		for _, l := range strings.Split(out, "\n") {
			if newerFormat.MatchString(l) {
				hits = append(hits, l)
			}
		}
		if len(hits) > 0 {
			fmt.Fprintf(&b, "\n\t%s logged it %d times, first: %s", n.Name, len(hits), hits[0])
		}
	}
	return b.String()
}

// contractReport logs how the earlier release's answers differ from this
// tree's OpenAPI document (apitest.Predates): what a client written
// against the document meets during the upgrade. The HTTP workers' route
// must not differ.
func (u *upgrade) contractReport() {
	seen := apitest.Predated()
	if len(seen) == 0 {
		u.t.Logf("every answer of %s matched this tree's OpenAPI document", u.old.Version)
		return
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		fmt.Fprintf(&b, "\n\t%dx %s", seen[k], k)
		if strings.HasPrefix(k, "POST /v1/sequences/") {
			u.t.Errorf("an answer of %s to the HTTP workers' route breaks this tree's OpenAPI document: %s", u.old.Version, k)
		}
	}
	u.t.Logf("answers of %s that this tree's OpenAPI document (httpapi/openapi.json) does not describe:%s", u.old.Version, b.String())
}
