package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A root other than the default one gets its election and marker paths
// derived from it, unless an earlier release served it on the default
// paths (here the test's stand-ins for them): then it keeps those, or a
// rolling upgrade would run two elections for one root.
func TestSettlePathsKeepsWhatARootUsedBefore(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	conn := testenv.Connect(t, z.Servers, 10*time.Second)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, root, oldE, oldM, derivedE, derivedM string)
		explicit bool // election_path set in the configuration
		// whether each path ends up the old default
		oldElection, oldMarker bool
	}{
		{name: "fresh"},
		{name: "unclaimed, root never served", setup: func(t *testing.T, _, oldE, oldM, _, _ string) {
			mustCreate(t, conn, oldE, oldM)
		}},
		{name: "unclaimed, root served", setup: func(t *testing.T, root, oldE, oldM, _, _ string) {
			mustCreate(t, conn, oldE, oldM, root)
		}, oldElection: true, oldMarker: true},
		{name: "claimed by this root", setup: func(t *testing.T, root, oldE, oldM, _, _ string) {
			claim(t, conn, root, oldE, oldM)
		}, oldElection: true, oldMarker: true},
		{name: "claimed by another root", setup: func(t *testing.T, root, oldE, oldM, _, _ string) {
			claim(t, conn, root+"-other", oldE, oldM)
			mustCreate(t, conn, root)
		}},
		{name: "unclaimed, root served, derived used since", setup: func(t *testing.T, root, oldE, oldM, derivedE, derivedM string) {
			mustCreate(t, conn, oldE, oldM, root)
			claim(t, conn, root, derivedE, derivedM)
		}},
		{name: "explicit election path", setup: func(t *testing.T, root, oldE, oldM, _, _ string) {
			mustCreate(t, conn, oldE, oldM, root)
		}, explicit: true, oldMarker: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := z.Path(t.Name()[len("TestSettlePathsKeepsWhatARootUsedBefore/"):])
			root, oldE, oldM := base+"/ids", base+"/old-election", base+"/old-cluster"
			derivedE, derivedM := config.DerivedPaths(root)
			t.Cleanup(func() { _ = testenv.DeleteAll(conn, derivedE[:len(derivedE)-len("/election")]) })
			if tc.setup != nil {
				tc.setup(t, root, oldE, oldM, derivedE, derivedM)
			}
			cfg := config.DefaultConfig()
			cfg.ZK, cfg.Root = z.Servers, root
			if tc.explicit {
				cfg.ElectionPath = base + "/mine"
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			seqs, err := seqzk.NewClient(conn, seqzk.Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if err := host.SettlePathsFrom(ctx, cfg, seqs, zerolog.Nop(), oldE, oldM); err != nil {
				t.Fatal(err)
			}
			wantE, wantM := derivedE, derivedM
			switch {
			case tc.explicit:
				wantE = base + "/mine"
			case tc.oldElection:
				wantE = oldE
			}
			if tc.oldMarker {
				wantM = oldM
			}
			if cfg.ElectionPath != wantE || cfg.MarkerPath != wantM {
				t.Errorf("election_path %s, marker_path %s; want %s, %s", cfg.ElectionPath, cfg.MarkerPath, wantE, wantM)
			}
			// What was settled stays settled when the configuration is
			// validated again: a path kept from before is not derived
			// from the root a second time.
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if cfg.ElectionPath != wantE || cfg.MarkerPath != wantM {
				t.Errorf("validated again after settling: election_path %s, marker_path %s; want %s, %s", cfg.ElectionPath, cfg.MarkerPath, wantE, wantM)
			}
		})
	}
}

func mustCreate(t *testing.T, conn *zkclient.Client, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := conn.EnsurePath(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// claim writes root's claim into the znodes at paths, as serve does.
func claim(t *testing.T, conn *zkclient.Client, root string, paths ...string) {
	t.Helper()
	seqs, err := seqzk.NewClient(conn, seqzk.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := seqs.Operator().Claim(context.Background(), p, "marker_path"); err != nil {
			t.Fatal(err)
		}
	}
}

// A root a primary served on election and marker paths set by hand (as
// 0.1.0's docs asked), started now with only root set: the derived paths
// were never used and host.SettlePaths finds no default one, so serve would
// hold a second election beside the replicas still on the old paths. It
// refuses instead (exit 2), naming the settings to set. A root with no
// primary's mark (gone after a ZooKeeper loss, or only registered) starts.
func TestServeRefusesARootServedOnPathsItCannotFind(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	conn := testenv.Connect(t, z.Servers, 10*time.Second)
	ctx := context.Background()
	validated := state.State{Start: 1, Next: 10, Ceiling: 100, End: state.MaxID, ZKEpoch: 3, Marker: state.MarkerPrefix + "0123456789abcdef"}
	registered := state.State{Registered: true, Start: 1, End: state.MaxID}
	for _, tc := range []struct {
		name    string
		seqs    []state.State // under the root; nil: no root znode
		derived bool          // the derived election path exists
		refused bool
	}{
		{name: "no root"},
		{name: "registrations only", seqs: []state.State{registered}},
		{name: "served by hand-set paths", seqs: []state.State{registered, validated}, refused: true},
		{name: "served on the derived paths", seqs: []state.State{validated}, derived: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := z.Path(strings.ReplaceAll(t.Name(), " ", "-")) + "/ids"
			cfg := config.DefaultConfig()
			cfg.ZK, cfg.Root = z.Servers, root
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = testenv.DeleteAll(conn, path.Dir(cfg.ElectionPath)) })
			for i, st := range tc.seqs {
				mustCreate(t, conn, root)
				if _, err := conn.Session().Create(ctx, fmt.Sprintf("%s/s%d", root, i), st.Encode(), 0); err != nil {
					t.Fatal(err)
				}
			}
			if tc.derived {
				claim(t, conn, root, cfg.ElectionPath)
			}
			seqs, err := seqzk.NewClient(conn, seqzk.Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			err = usageIfConfig(host.RefuseUnknownElection(ctx, cfg, seqs))
			var usage *usageError
			switch {
			case tc.refused && !errors.As(err, &usage):
				t.Fatalf("want a usage error (exit 2), got %v", err)
			case tc.refused && !strings.Contains(err.Error(), "election_path") || tc.refused && !strings.Contains(err.Error(), "marker_path"):
				t.Fatalf("the refusal does not name the settings to set: %v", err)
			case !tc.refused && err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
