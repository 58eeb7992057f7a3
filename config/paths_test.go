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
