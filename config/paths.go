package config

import (
	"fmt"
	"net/url"
	"strings"
)

// RootsPrefix is the znode under which roots other than the default one
// get their derived election and marker paths (DerivedPaths).
const RootsPrefix = "/seqkeeper/roots"

// DerivedPaths returns the election_path and marker_path that a root gets
// when they are not set, so that setting root (and store) is enough to
// give a root its own election and marker:
//
//   - the default root keeps the paths every earlier release used,
//     DefaultElectionPath and DefaultMarkerPath;
//   - any other root gets RootsPrefix/<root>/election and
//     RootsPrefix/<root>/cluster, with <root> the root without its
//     leading '/', path-escaped into one znode name ("/billing/ids" is
//     "billing%2Fids"), so that no root's paths lie under another's.
//
// A root served before derivation existed, on the default paths, keeps
// them: 'seqkeeper serve' and the operator commands look for that in
// ZooKeeper (see internal/host, SettlePaths).
func DerivedPaths(root string) (election, marker string) {
	if root == DefaultRoot {
		return DefaultElectionPath, DefaultMarkerPath
	}
	dir := RootsPrefix + "/" + url.PathEscape(strings.TrimPrefix(root, "/"))
	return dir + "/election", dir + "/cluster"
}

// PathDerived reports whether Validate derived the setting key
// ("election_path" or "marker_path") from root because it was not set.
func (c *Config) PathDerived(key string) bool {
	switch key {
	case "election_path":
		return c.derived.election
	case "marker_path":
		return c.derived.marker
	}
	return false
}

// SettlePath sets the setting key ("election_path" or "marker_path") to
// path as decided after Validate derived it (cmd/seqkeeper's settlePaths:
// a root served on the default path before paths were derived keeps it).
// The path counts as set from then on: PathDerived reports false, and a
// later Validate keeps it instead of deriving it from Root again.
func (c *Config) SettlePath(key, path string) error {
	switch key {
	case "election_path":
		c.ElectionPath, c.derived.election = path, false
	case "marker_path":
		c.MarkerPath, c.derived.marker = path, false
	default:
		return fmt.Errorf("settle %q: not a path setting (election_path or marker_path)", key)
	}
	return nil
}

// derivePaths fills ElectionPath and MarkerPath from Root where they are
// empty, and records which it filled. A path derived earlier (and not
// settled since, SettlePath) is derived again, so that a changed Root
// moves it along.
func (c *Config) derivePaths() {
	election, marker := DerivedPaths(c.Root)
	if c.ElectionPath == "" || c.derived.election {
		c.ElectionPath, c.derived.election = election, true
	}
	if c.MarkerPath == "" || c.derived.marker {
		c.MarkerPath, c.derived.marker = marker, true
	}
}
