package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// upgradeCustomRoot is the root of TestRollingUpgradeCustomRoot: not the
// default one, so this release derives other election and marker paths
// for it (config.DerivedPaths) than the earlier release used.
const upgradeCustomRoot = "/upgrade-custom/ids"

// TestRollingUpgradeCustomRoot upgrades three replicas of the earlier
// release serving a root other than the default one, where an explicit or
// previously used path wins over the derived one. The earlier release
// derives nothing from root: its replicas set
// election_path and marker_path, as its documentation required, to the
// paths it used, /seqkeeper/election and /seqkeeper/cluster. The replicas
// of this release that replace them, one at a time (standbys first, the
// primary last), are given only the root and the store: they derive
// /seqkeeper/roots/upgrade-custom%2Fids/{election,cluster}, and must find
// out (settlePaths in cmd/seqkeeper) that the root was served on the
// earlier paths and keep them. Checked: every replica of both releases is
// a candidate of the one election in the mixed cluster and at the end,
// nobody is under the derived paths, the election carries this root's
// claim; one primary in every phase, no call failed or lasted longer than
// ceiling_wait, no ID twice (the history's ledgers), seqkeeper verify.
//
// The earlier release's library worker (0.1.0's) takes from the default
// root only, so the workload is this release's library workers (an
// allocator and a taker on the custom root) and four HTTP takers over the
// replicas in service, those of the earlier release included. There is no
// rollback (TestRollingUpgrade covers it on the default root), and the
// mixed cluster is held 45 s, as on the default root.
//
// Only election paths that were the earlier release's defaults can be
// found: a root that an earlier release served on paths of its own choice
// (its documentation's /seqkeeper/orders/election) leaves no trace that
// leads to them, so its operator must keep those settings.
func TestRollingUpgradeCustomRoot(t *testing.T) {
	takeClusterSlot(t)
	runRollingUpgrade(t, upgradeScenario{
		Root: upgradeCustomRoot,
		OldEnv: map[string]string{
			"SEQKEEPER_ELECTION_PATH": config.DefaultElectionPath,
			"SEQKEEPER_MARKER_PATH":   config.DefaultMarkerPath,
		},
		Election:    config.DefaultElectionPath,
		UpgradeOnly: true,
	})
}

// checkElection checks, when the scenario names its election path, that
// every replica in service is a candidate there (one election whatever
// release each runs), that no replica is a candidate under the paths this
// release derives from the root, and, once a replica of this release has
// started, that the election carries the root's claim (it settled on the
// path rather than derive another). Candidates come and go with a
// handover: the count must be right within 15 s.
func (u *upgrade) checkElection(ctx context.Context, when string) {
	if u.sc.Election == "" {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	zc, err := zkclient.Dial(dctx, u.proxy.Addrs(), zkclient.Options{SessionTimeout: zkclient.DefaultSessionTimeout})
	cancel()
	if err != nil {
		u.t.Errorf("election %s: connect to ZooKeeper: %v", when, err)
		return
	}
	defer zc.Close()
	want := len(u.rot.in())
	var kids []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		kids, _, err = zc.Session().Children(ctx, u.sc.Election)
		// Candidates only: this release's leader also keeps its
		// heartbeat there (leader-beat).
		kids = slices.DeleteFunc(kids, func(k string) bool { return !strings.HasPrefix(k, "_c_") })
		if err == nil && len(kids) == want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err != nil || len(kids) != want {
		u.t.Errorf("election %s: %d candidates under %s (%v), want the %d replicas in service (%s): more than one election?",
			when, len(kids), u.sc.Election, err, want, u.describeIn())
	}
	electionD, markerD := config.DerivedPaths(u.sc.Root)
	for _, p := range []string{electionD, markerD} {
		exists, _, err := zc.Session().Exists(ctx, p)
		if err != nil || exists {
			u.t.Errorf("election %s: %s (derived from root %s) exists: %v, err %v; this release's replicas must keep the earlier paths",
				when, p, u.sc.Root, exists, err)
		}
	}
	data, _, err := zc.Session().Get(ctx, u.sc.Election)
	claimed := err == nil && strings.Contains(string(data), "root "+strconv.Quote(u.sc.Root))
	if u.countIn(u.cur) > 0 && !claimed {
		u.t.Errorf("election %s: %s holds %q (%v), not the claim of root %s that this release writes",
			when, u.sc.Election, data, err, u.sc.Root)
	}
	u.t.Logf("election %s: %d candidates under %s, replicas in service: %s; claimed for %s: %v; derived paths %s and %s checked",
		when, len(kids), u.sc.Election, u.describeIn(), u.sc.Root, claimed, electionD, markerD)
}

// describeIn names the replicas in service and their versions.
func (u *upgrade) describeIn() string {
	var parts []string
	for _, n := range u.rot.in() {
		parts = append(parts, fmt.Sprintf("%s %s", n.Name, u.versionOf(n)))
	}
	return strings.Join(parts, ", ")
}
