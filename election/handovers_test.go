package election

import (
	"net"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// Crash after crash, each one is handed over by the next in line's
// deletion of the leader's node, never by its session's expiry: five
// leaders in a row stop (two with -short), each replaced by a replica
// that joined as a fresh candidate (a restart), so from the second round
// on the next in line is a candidate that became next only when the node
// below its predecessor went away.
//
// killed: the leader's process is gone with its session alive on the
// server (its connection frozen, Run cancelled so it acts no more) and its
// port refuses connections: the next in line's probe sees it (crash.go).
// frozen: the leader's connection freezes and its port keeps accepting:
// the next in line sees its heartbeat stand still (beat.go).
func TestEveryCrashInARowIsHandedOverFast(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second
	rounds := 5
	if testing.Short() {
		rounds = 2 // the second is the first whose next in line moved up
	}
	for _, tc := range []struct {
		name   string
		frozen bool
		limit  time.Duration // from the fault to the successor's term
	}{
		{"killed", false, timeout / 4},
		// lossAfter 3 s: the beat stands still 3.75 s before the deletion.
		{"frozen", true, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, clusterOpts{proxied: true, timeout: timeout, lossFraction: 0.3, crashProbe: 50 * time.Millisecond})
			observer := testenv.Connect(t, c.servers, timeout)
			listeners := map[*replica]net.Listener{}
			join := func(name string) *replica {
				ln := listen(t)
				r := c.newReplica(name, Config{Identity: Identity{ID: name, Address: ln.Addr().String()}})
				listeners[r] = ln
				r.start()
				eventually(t, timeout, name+" to join", func() bool { return r.e.Stats().Candidacies == 1 })
				return r
			}
			for _, name := range []string{"a", "b", "c"} {
				join(name)
			}
			cur := c.waitTerm(0, timeout)
			for round := 1; round <= rounds; round++ {
				q := c.queue(observer)
				if len(q) != 3 || q[0] != cur.replica {
					t.Fatalf("round %d: queue of %d, led by %s; want 3 led by %s", round, len(q), q[0].name, cur.replica.name)
				}
				next := q[1]
				deletions := next.e.Stats().CrashDeletions
				time.Sleep(500 * time.Millisecond) // the next in line has probed and read the beat
				old := cur.replica
				at := time.Now()
				old.proxy.Pause()
				if !tc.frozen {
					_ = listeners[old].Close()
					old.cancel() // its term ends; its node stays with its session
				}
				cur = c.waitTerm(round, 3*timeout)
				took := cur.start.Sub(at)
				t.Logf("round %d: %s took over from %s %s after the fault", round, cur.replica.name, old.name, took.Round(time.Millisecond))
				if cur.replica != next {
					t.Fatalf("round %d: %s leads; want %s, next in line", round, cur.replica.name, next.name)
				}
				if got := next.e.Stats().CrashDeletions - deletions; got != 1 {
					t.Errorf("round %d: %s deleted %d nodes; want 1: the handover waited for the session to expire", round, next.name, got)
				}
				if took >= tc.limit {
					t.Errorf("round %d: the handover took %s; want under %s (session timeout %s)", round, took.Round(time.Millisecond), tc.limit, timeout)
				}
				old.cancel() // restarted: a new process joins at the end of the queue
				join(string(rune('c' + round)))
			}
		})
	}
}
