package config

import (
	"strings"
	"testing"
)

func TestDerivedPaths(t *testing.T) {
	for _, tc := range []struct{ root, election, marker string }{
		{DefaultRoot, DefaultElectionPath, DefaultMarkerPath},
		{"/billing", "/seqkeeper/roots/billing/election", "/seqkeeper/roots/billing/cluster"},
		{"/billing/ids", "/seqkeeper/roots/billing%2Fids/election", "/seqkeeper/roots/billing%2Fids/cluster"},
		{"/a b", "/seqkeeper/roots/a%20b/election", "/seqkeeper/roots/a%20b/cluster"},
	} {
		e, m := DerivedPaths(tc.root)
		if e != tc.election || m != tc.marker {
			t.Errorf("DerivedPaths(%q) = %q, %q; want %q, %q", tc.root, e, m, tc.election, tc.marker)
		}
	}
	// No root's derived paths lie under another's: /a's directory is not
	// a prefix of /a/b's.
	ea, _ := DerivedPaths("/a")
	eb, _ := DerivedPaths("/a/b")
	if within(strings.TrimSuffix(ea, "/election"), eb) {
		t.Errorf("the paths of /a/b (%s) lie under those of /a (%s)", eb, ea)
	}
}

func TestValidateDerivesUnsetPathsOnly(t *testing.T) {
	c := DefaultConfig()
	c.ZK = []string{"zk:2181"}
	c.Root = "/billing"
	c.MarkerPath = "/mine/marker"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ElectionPath != "/seqkeeper/roots/billing/election" || !c.PathDerived("election_path") {
		t.Errorf("election_path = %q (derived %t), want the one derived from /billing", c.ElectionPath, c.PathDerived("election_path"))
	}
	if c.MarkerPath != "/mine/marker" || c.PathDerived("marker_path") {
		t.Errorf("marker_path = %q (derived %t), want the one set", c.MarkerPath, c.PathDerived("marker_path"))
	}
	// A derived path follows the root when it changes and is validated
	// again; a set one stays.
	c.Root = "/orders"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ElectionPath != "/seqkeeper/roots/orders/election" || c.MarkerPath != "/mine/marker" {
		t.Errorf("after the root changed: election_path %q, marker_path %q", c.ElectionPath, c.MarkerPath)
	}
}

// A path settled after Validate derived it (a root served on the old
// default election path keeps it) stays when the configuration is
// validated again: it is no longer a derived path to follow the root.
func TestValidateKeepsASettledPath(t *testing.T) {
	c := DefaultConfig()
	c.ZK = []string{"zk:2181"}
	c.Root = "/billing"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.SettlePath("election_path", DefaultElectionPath); err != nil {
		t.Fatal(err)
	}
	if c.PathDerived("election_path") || !c.PathDerived("marker_path") {
		t.Errorf("after settling election_path: derived election_path %t, marker_path %t; want false, true",
			c.PathDerived("election_path"), c.PathDerived("marker_path"))
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ElectionPath != DefaultElectionPath {
		t.Errorf("validated again: election_path %q, want the settled %q", c.ElectionPath, DefaultElectionPath)
	}
	if _, m := DerivedPaths("/billing"); c.MarkerPath != m {
		t.Errorf("validated again: marker_path %q, want the derived %q", c.MarkerPath, m)
	}
	if err := c.SettlePath("root", "/x"); err == nil || !strings.Contains(err.Error(), "election_path or marker_path") {
		t.Errorf("SettlePath of another setting: %v, want an error naming the path settings", err)
	}
}
