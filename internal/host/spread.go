package host

import (
	"context"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/election"
)

// SpreadOptions pace Spread.
type SpreadOptions struct {
	// Every is how often the elections are looked at.
	Every time.Duration
	// Cooldown is the least time between two handovers of this replica,
	// and after its start: the elections settle (the successor takes
	// office, the other replicas see it) before the next look decides.
	Cooldown time.Duration
}

// Spread keeps this replica from leading more than its share of the roots
// it hosts, until ctx ends: with R roots and N live replicas (the distinct
// replicas among the candidates of these roots' elections), no replica
// leads more than ceil(R/N). When this one leads more, it hands one root
// over to the next candidate in that root's line, by Resign: the same
// graceful path as a SIGTERM's, the successor taking over at once and
// this replica rejoining last. It hands over one root per Cooldown, and
// only a root in whose line a replica that leads fewer than ceil(R/N)
// waits, preferring the root where it stands nearest the head: the
// successor itself, or else one that then leads a root too many and
// hands it on down the line. A root never goes to a replica that is
// already at its share unless it passes on, so with every replica
// hosting the same roots this converges.
// It never takes leadership: a replica that leads too few waits for the
// others to hand over.
func Spread(ctx context.Context, roots []*Root, o SpreadOptions, log zerolog.Logger) {
	if len(roots) < 2 || o.Every <= 0 {
		return
	}
	log = log.With().Str("component", "spread").Logger()
	last := time.Now() // let the elections settle after the start
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(last) < o.Cooldown {
			continue
		}
		if spreadOnce(ctx, roots, log) {
			last = time.Now()
		}
	}
}

// spreadOnce looks at the elections and hands one root over if this
// replica leads too many. It reports whether it handed one over.
func spreadOnce(ctx context.Context, roots []*Root, log zerolog.Logger) bool {
	lines := make([][]election.Candidate, len(roots))
	live := map[string]bool{}
	for i, r := range roots {
		cs, err := election.Candidates(ctx, r.zk, r.cfg.ElectionPath)
		if err != nil {
			log.Debug().Err(err).Str("root_name", r.name).Msg("spread: cannot read the candidates; trying again later")
			return false
		}
		lines[i] = cs
		for _, c := range cs {
			live[c.ID] = true
		}
	}
	me := roots[0].identity.ID
	live[me] = true
	replicas := len(live)
	limit := (len(roots) + replicas - 1) / replicas
	leads := map[string]int{}
	var mine []int
	for i, cs := range lines {
		if len(cs) > 0 {
			leads[cs[0].ID]++
		}
		if roots[i].election.IsLeader() {
			mine = append(mine, i)
		}
	}
	if len(mine) <= limit {
		return false
	}
	// The root with a replica that leads fewer than its share nearest
	// the head of its line (ties: the first root). When that replica is
	// not next, the successor leads one root too many for a while and
	// hands it on, down the line: the resigner rejoins last.
	best, bestDist := -1, 0
	for _, i := range mine {
		if d, ok := distanceToUnderloaded(lines[i], me, leads, limit); ok && (best < 0 || d < bestDist) {
			best, bestDist = i, d
		}
	}
	if best < 0 {
		log.Debug().Int("leading", len(mine)).Int("limit", limit).Msg("spread: leading more than this replica's share, but no replica in line leads fewer; waiting")
		return false
	}
	r := roots[best]
	next, _ := successor(lines[best], me)
	log.Info().Str("root_name", r.name).Str("root", r.cfg.Root).Int("leading", len(mine)).Int("roots", len(roots)).
		Int("replicas", replicas).Int("share", limit).Str("successor", next).Int("successor_leads", leads[next]).
		Msgf("spread: this replica leads %d of %d roots, more than its share ceil(%d/%d) = %d; handing root %s over to %s (which leads %d)",
			len(mine), len(roots), len(roots), replicas, limit, r.name, next, leads[next])
	rctx, cancel := context.WithTimeout(ctx, r.zk.SessionTimeout()*2)
	defer cancel()
	if err := r.Resign(rctx); err != nil {
		log.Warn().Err(err).Str("root_name", r.name).Msg("spread: the handover did not complete; looking again after the cooldown")
	}
	return true
}

// distanceToUnderloaded is how far down a root's line, after me, the
// first replica that leads fewer than limit roots stands (1: next).
func distanceToUnderloaded(line []election.Candidate, me string, leads map[string]int, limit int) (int, bool) {
	d := 0
	for _, id := range line {
		if id.ID == me {
			continue
		}
		d++
		if leads[id.ID] < limit {
			return d, true
		}
	}
	return 0, false
}

// successor is the replica next in line after me in a root's candidates.
func successor(line []election.Candidate, me string) (string, bool) {
	i := slices.IndexFunc(line, func(id election.Candidate) bool { return id.ID != me })
	if i < 0 {
		return "", false
	}
	return line[i].ID, true
}
