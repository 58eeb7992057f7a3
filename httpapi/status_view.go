package httpapi

import (
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/internal/primary"
)

// The body of GET /v1/status as serve provides it. These are views: the
// JSON contract of the API, kept apart from the structs of election and
// primary so that renaming or adding a field there cannot change what
// callers read. Keys are snake_case and enums are words; booleans are
// never omitted. (Status*Of build them from the internal structs.)

// StatusView is the body of GET /v1/status of a serving replica.
type StatusView struct {
	// Replica is this replica.
	Replica ReplicaView `json:"replica"`
	// Leading: this replica is the primary.
	Leading bool `json:"leading"`
	// Primary is the replica the election names primary; null when it
	// cannot be read now (no ZooKeeper session, no candidate).
	Primary *ReplicaView `json:"primary"`
	// ZooKeeperSession is the session ID in hex (0x0 without one).
	ZooKeeperSession string `json:"zookeeper_session"`
	// ZooKeeperState is a word: has_session, connecting, connected,
	// disconnected, expired, auth_failed or unknown.
	ZooKeeperState string `json:"zookeeper_state"`
	// Store is the store's health as its own last requests found it.
	Store StoreView `json:"store"`
	// Reserve is the primary's view of every sequence; only on the
	// primary.
	Reserve *ReserveView `json:"reserve,omitempty"`
	// Election counts this replica's candidacies and terms.
	Election ElectionView `json:"election"`
	// Allocators is the state of this replica's allocators.
	Allocators []AllocatorStatus `json:"allocators"`
	// Handovers are the last changes of primary this replica observed,
	// newest first (a few; the first is what it saw when it started).
	Handovers []HandoverView `json:"handovers"`
	// Roots is every root's status on a replica of several roots; the
	// fields above then describe the process (Leading: it leads some
	// root; Primary nil; Store healthy when every root's is, URL empty).
	Roots []RootStatusView `json:"roots,omitempty"`
}

// RootStatusView is one root's status on a replica of several roots, as
// GET /v1/roots/{root}/status answers it too.
type RootStatusView struct {
	// Name is the root's name in URLs; Root its znode.
	Name string `json:"name"`
	Root string `json:"root"`
	StatusView
}

// HandoverView is one change of primary a replica observed.
type HandoverView struct {
	At time.Time `json:"at"`
	// Primary is the new primary; null when there was none.
	Primary *ReplicaView `json:"primary"`
}

// ReplicaView identifies a replica.
type ReplicaView struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Version string `json:"version,omitempty"`
}

// StoreView is the store's health from its last requests, never from a
// request made for the status page or a probe.
type StoreView struct {
	URL string `json:"url"`
	// Healthy: the store's last request succeeded.
	Healthy bool `json:"healthy"`
	// Error is the last request's error ("not asked yet" before the
	// first); absent when healthy.
	Error string `json:"error,omitempty"`
	// LastRequest is when the store was last asked anything: the age of
	// Healthy. Absent before the first request.
	LastRequest *time.Time `json:"last_request,omitempty"`
}

// ReserveView is the primary's view of the reserved ceilings.
type ReserveView struct {
	Leading bool `json:"leading"`
	// Epoch is the primary's fencing epoch; ZooKeeperEpoch the ZooKeeper
	// leader epoch it last validated against.
	Epoch          int64 `json:"epoch"`
	ZooKeeperEpoch int64 `json:"zookeeper_epoch"`
	// LastSweep is when the primary last checked every sequence; absent
	// before its first sweep.
	LastSweep time.Time `json:"last_sweep,omitzero"`
	// Summary covers every sequence the primary maintains, whichever
	// ones Sequences lists.
	Summary ReserveSummaryView `json:"summary"`
	// Sequences are the ones the request asked for (StatusQuery), in
	// name order.
	Sequences []SequenceReserveView `json:"sequences"`
}

// ReserveSummaryView sums up the primary's view of every sequence.
type ReserveSummaryView struct {
	Sequences int `json:"sequences"`
	// Unhealthy counts the unhealthy sequences, exhausted ones apart:
	// Exhausted counts those (absent when none).
	Unhealthy int `json:"unhealthy"`
	Exhausted int `json:"exhausted,omitempty"`
	// MinRunwaySeconds is the shortest runway and MinRunwaySequence its
	// sequence, exhausted ones apart; null and empty without others.
	MinRunwaySeconds  *float64 `json:"min_runway_seconds"`
	MinRunwaySequence string   `json:"min_runway_sequence"`
}

// SequenceReserveView is one sequence's reserve as the primary sees it.
type SequenceReserveView struct {
	Name          string  `json:"name"`
	Legacy        bool    `json:"legacy"`
	Next          int64   `json:"next"`
	Ceiling       int64   `json:"ceiling"`
	StoredCeiling int64   `json:"stored_ceiling"`
	RatePerSecond float64 `json:"rate_per_second"`
	// RunwaySeconds is how long the reserve lasts at the current rate
	// (at most a day).
	RunwaySeconds float64 `json:"runway_seconds"`
	Healthy       bool    `json:"healthy"`
	Problem       string  `json:"problem,omitempty"`
	// Exhausted: every ID of its space handed out (it ends there).
	Exhausted bool `json:"exhausted,omitempty"`
	// LegacyMargin: for a legacy counter, the smallest gap seen between
	// the stored mark and the counter (negative: it once ran past).
	LegacyMargin int64 `json:"legacy_margin,omitempty"`
}

// ElectionView counts this replica's part in the leader election.
type ElectionView struct {
	Candidacies  int64 `json:"candidacies"`
	Terms        int64 `json:"terms"`
	Resignations int64 `json:"resignations"`
	Losses       int64 `json:"losses"`
	// CrashDeletions: nodes of crashed or silent leaders this replica
	// deleted (crash_probe).
	CrashDeletions int64 `json:"crash_deletions"`
}

// ReplicaViewOf is the view of id.
func ReplicaViewOf(id election.Identity) ReplicaView {
	return ReplicaView{ID: id.ID, Address: id.Address, Version: id.Version}
}

// ElectionViewOf is the view of st.
func ElectionViewOf(st election.Stats) ElectionView {
	return ElectionView{Candidacies: st.Candidacies, Terms: st.Terms, Resignations: st.Resignations, Losses: st.Losses, CrashDeletions: st.CrashDeletions}
}

// ReserveViewOf is the view of st.
func ReserveViewOf(st primary.Status, q StatusQuery) ReserveView {
	return ReserveViewFrom(st.Filter, q)
}

// ReserveViewFrom is the view of what statusOf (primary.Primary.StatusOf)
// returns, asking it to list only the sequences q asks for: the summary
// covers every sequence without a list of them all.
func ReserveViewFrom(statusOf func(keep func(*primary.SequenceStatus) bool) primary.Status, q StatusQuery) ReserveView {
	named := make(map[string]bool, len(q.Names))
	for _, n := range q.Names {
		named[n] = true
	}
	var sum ReserveSummaryView
	st := statusOf(func(s *primary.SequenceStatus) bool {
		sum.Sequences++
		switch {
		case s.Exhausted:
			sum.Exhausted++
		case !s.Healthy:
			sum.Unhealthy++
		}
		if !s.Exhausted && (sum.MinRunwaySeconds == nil || s.RunwaySeconds < *sum.MinRunwaySeconds) {
			r := s.RunwaySeconds
			sum.MinRunwaySeconds, sum.MinRunwaySequence = &r, s.Name
		}
		return q.Sequences == SequencesAll || (q.Sequences == SequencesUnhealthy && !s.Healthy) || named[s.Name]
	})
	v := ReserveView{Leading: st.Leading, Epoch: st.Epoch, ZooKeeperEpoch: st.ZKEpoch, LastSweep: st.LastSweep,
		Summary: sum, Sequences: make([]SequenceReserveView, 0, len(st.Sequences))}
	for i := range st.Sequences {
		s := &st.Sequences[i]
		v.Sequences = append(v.Sequences, SequenceReserveView{Name: s.Name, Legacy: s.Legacy, Next: s.Next, Ceiling: s.Ceiling,
			StoredCeiling: s.StoredCeiling, RatePerSecond: s.Rate, RunwaySeconds: s.RunwaySeconds,
			Healthy: s.Healthy, Problem: s.Problem, Exhausted: s.Exhausted, LegacyMargin: s.LegacyMargin})
	}
	return v
}

// Which of the primary's sequences GET /v1/status lists (its sequences
// parameter).
const (
	SequencesAll       = "all"       // every one (the default)
	SequencesUnhealthy = "unhealthy" // the unhealthy ones
	SequencesNone      = "none"      // none: the summary only
)

// maxStatusNames bounds the name parameters of one GET /v1/status.
const maxStatusNames = 1000

// StatusQuery is what a GET /v1/status asks for: which of the primary's
// sequences to list in reserve.sequences (Sequences), and these by name
// as well (Names). At 100,000 sequences the whole list is megabytes; the
// console asks for the unhealthy ones and those on its page.
type StatusQuery struct {
	Sequences string
	Names     []string
}

// statusQuery reads a StatusQuery from GET /v1/status's raw query.
func statusQuery(raw string) (StatusQuery, error) {
	v, err := parseQuery(raw, "name")
	if err != nil {
		return StatusQuery{}, err
	}
	q := StatusQuery{Sequences: SequencesAll, Names: v["name"]}
	if s := v.Get("sequences"); s != "" {
		switch s {
		case SequencesAll, SequencesUnhealthy, SequencesNone:
			q.Sequences = s
		default:
			return q, fmt.Errorf("sequences must be all, unhealthy or none, not %q", s)
		}
	}
	if len(q.Names) > maxStatusNames {
		return q, fmt.Errorf("at most %d name parameters, not %d", maxStatusNames, len(q.Names))
	}
	return q, nil
}
