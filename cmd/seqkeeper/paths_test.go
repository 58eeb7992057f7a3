package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
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
			if err := settlePathsFrom(ctx, cfg, seqs, zerolog.Nop(), oldE, oldM); err != nil {
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
		if err := seqs.Claim(context.Background(), p, "marker_path"); err != nil {
			t.Fatal(err)
		}
	}
}
