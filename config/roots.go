// Several roots in one process: the config file's roots: list.

package config

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// RootConfig is one entry of the config file's roots: list: a root that
// 'seqkeeper serve' hosts beside the others in one process, with its own
// election, primary, store and cluster marker. Everything else (ZooKeeper,
// HTTP, tokens, the primary's tunables) is the top level's, shared.
type RootConfig struct {
	// Name addresses the root in URLs (/v1/roots/{name}/...) and labels
	// its metrics (root="name"). Default: the root's last path element,
	// with characters other than letters, digits, '.', '_' and '-' made
	// '-'. Validate fills it in.
	Name string
	// Root is the znode under which the root's sequences live. Required.
	Root string
	// Store is the root's store URL. Required; no two roots share one.
	Store string
	// ElectionPath and MarkerPath: empty, derived from Root
	// (DerivedPaths), as for the single root.
	ElectionPath, MarkerPath string
	// derived records which paths Validate derived from Root.
	derived struct{ election, marker bool }
}

// rootKeys are the keys of a roots: entry, in documentation order.
var rootKeys = []string{"name", "root", "store", "election_path", "marker_path"}

// MaxRootName bounds a root's name, which appears in URLs and labels.
const MaxRootName = 63

// rootName is what a root's name may be: URL-safe without escaping.
var rootName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// parseRoots reads the value of the roots: key: a list of mappings. errorf
// makes an error naming the file and a line.
func parseRoots(v *yaml.Node, errorf func(line int, format string, args ...any) error) ([]RootConfig, []error) {
	if v.Kind != yaml.SequenceNode {
		return nil, []error{errorf(v.Line, "roots: want a list of roots, each a mapping with root and store (and optionally name, election_path, marker_path), found %s", kindName(v))}
	}
	var out []RootConfig
	var errs []error
	for i, e := range v.Content {
		if e.Kind != yaml.MappingNode {
			errs = append(errs, errorf(e.Line, "roots: entry %d: want a mapping (root: ..., store: ...), found %s", i+1, kindName(e)))
			continue
		}
		var rc RootConfig
		seen := map[string]int{}
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, val := e.Content[j], e.Content[j+1]
			key := k.Value
			field := map[string]*string{"name": &rc.Name, "root": &rc.Root, "store": &rc.Store,
				"election_path": &rc.ElectionPath, "marker_path": &rc.MarkerPath}[key]
			switch {
			case k.Kind != yaml.ScalarNode || field == nil:
				errs = append(errs, errorf(k.Line, "roots: entry %d: unknown key %q: an entry takes only %s; every other setting is shared and set at the top level", i+1, key, strings.Join(rootKeys, ", ")))
				continue
			case seen[key] > 0:
				errs = append(errs, errorf(k.Line, "roots: entry %d: key %q repeated (first at line %d)", i+1, key, seen[key]))
				continue
			case val.Kind != yaml.ScalarNode || val.ShortTag() == "!!binary":
				errs = append(errs, errorf(val.Line, "roots: entry %d: %s: want a single value, found %s", i+1, key, kindName(val)))
				continue
			}
			seen[key] = k.Line
			if val.Tag != "!!null" {
				*field = val.Value
			}
		}
		for _, req := range []string{"root", "store"} {
			if seen[req] == 0 {
				errs = append(errs, errorf(e.Line, "roots: entry %d has no %s: every root needs its own root and store", i+1, req))
			}
		}
		out = append(out, rc)
	}
	if len(v.Content) == 0 {
		errs = append(errs, errorf(v.Line, "roots: an empty list; list the roots to serve, or remove the key to serve the one root of 'root' and 'store'"))
	}
	return out, errs
}

// DefaultRootName is the name a root gets when its entry gives none: its
// last path element, characters outside [A-Za-z0-9._-] made '-'.
func DefaultRootName(root string) string {
	last := path.Base(root)
	b := []byte(last)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), "._-")
	if len(name) > MaxRootName {
		name = name[:MaxRootName]
	}
	return name
}

// validateRoots checks the roots: list and fills in names and derived
// paths.
func (c *Config) validateRoots() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: roots: %s", ErrInvalid, fmt.Sprintf(format, args...)))
	}
	if err := c.topLevelRootOrStore(); err != nil {
		bad("%v", err)
	}
	for _, k := range []struct {
		key, val string
		derived  bool
	}{{"election_path", c.ElectionPath, c.derived.election}, {"marker_path", c.MarkerPath, c.derived.marker}} {
		if !k.derived {
			bad("set together with %s (%s), which every root would ignore: each root has its own, derived from its root or set in its entry; move %s into the entries that need it and remove it from the top level, the environment (%s) and the flags",
				k.key, k.val, k.key, EnvName(k.key))
		}
	}
	names, roots, stores := map[string]int{}, map[string]int{}, map[string]int{}
	type owned struct{ path, what string }
	var all []owned
	for i := range c.Roots {
		rc := &c.Roots[i]
		n := i + 1
		if err := zkclient.ValidateRoot(rc.Root); err != nil {
			bad("entry %d: root: %v", n, err)
			continue
		}
		if rc.Name == "" {
			rc.Name = DefaultRootName(rc.Root)
		}
		if len(rc.Name) > MaxRootName || !rootName.MatchString(rc.Name) {
			bad("entry %d (%s): name %q: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit (it appears in URLs and metric labels)", n, rc.Root, rc.Name, MaxRootName)
		}
		if prev, dup := names[rc.Name]; dup {
			bad("entries %d and %d are both named %q (a name defaults to the root's last path element): give each a name of its own with 'name:'", prev, n, rc.Name)
		}
		names[rc.Name] = n
		if prev, dup := roots[rc.Root]; dup {
			bad("entries %d and %d both serve root %s: list each root once", prev, n, rc.Root)
		}
		roots[rc.Root] = n
		if err := storeProblem(rc.Store); err != nil {
			bad("entry %d (%s): store %s: %v", n, rc.Name, RedactURL(rc.Store), err)
		} else if key := storeKey(rc.Store); key != "" {
			for other, m := range stores {
				if within(key, other) || within(other, key) {
					bad("entries %d and %d share a store (%s and %s): give each root a store of its own, siblings, never one inside another", m, n, RedactURL(c.Roots[m-1].Store), RedactURL(rc.Store))
				}
			}
			stores[key] = n
		}
		election, marker := DerivedPaths(rc.Root)
		if rc.ElectionPath == "" || rc.derived.election {
			rc.ElectionPath, rc.derived.election = election, true
		}
		if rc.MarkerPath == "" || rc.derived.marker {
			rc.MarkerPath, rc.derived.marker = marker, true
		}
		for _, p := range []owned{{rc.ElectionPath, "election_path"}, {rc.MarkerPath, "marker_path"}} {
			if err := zkclient.ValidateRoot(p.path); err != nil {
				bad("entry %d (%s): %s: %v", n, rc.Name, p.what, err)
			}
		}
		all = append(all, owned{rc.Root, fmt.Sprintf("entry %d (%s) root", n, rc.Name)},
			owned{rc.ElectionPath, fmt.Sprintf("entry %d (%s) election_path", n, rc.Name)},
			owned{rc.MarkerPath, fmt.Sprintf("entry %d (%s) marker_path", n, rc.Name)})
	}
	for i, p := range all {
		for _, q := range all[i+1:] {
			switch {
			case p.path == q.path:
				bad("%s and %s are both %s: each root needs its own root, election and marker", p.what, q.what, p.path)
			case within(p.path, q.path) || within(q.path, p.path):
				bad("%s %s and %s %s contain one another: keep roots and their paths siblings, never one under another", p.what, p.path, q.what, q.path)
			}
		}
	}
	return errs
}

// storeKey is a store URL reduced to where it keeps its objects
// (scheme://bucket/prefix, or file:///dir), for telling whether two
// stores overlap; "" when it does not parse.
func storeKey(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	p := strings.Trim(path.Clean("/"+u.Path), "/")
	return u.Scheme + "://" + u.Host + "/" + p
}

// RootNames returns the names of the roots: list, in its order.
func (c *Config) RootNames() []string {
	out := make([]string, len(c.Roots))
	for i, r := range c.Roots {
		out[i] = r.Name
	}
	return out
}

// ForRoot returns the configuration of one root of the roots: list, by
// name: the top level's settings with the entry's root, store and paths,
// and no list. It assumes Validate passed; nil for an unknown name.
func (c *Config) ForRoot(name string) *Config {
	i := slices.IndexFunc(c.Roots, func(r RootConfig) bool { return r.Name == name })
	if i < 0 {
		return nil
	}
	rc := c.Roots[i]
	out := *c
	out.Roots = nil
	out.Root, out.Store = rc.Root, rc.Store
	// What was derived stays marked derived, so that settlePaths can
	// keep a path this root used before derivation existed.
	out.ElectionPath, out.MarkerPath = rc.ElectionPath, rc.MarkerPath
	out.derived = rc.derived
	return &out
}

// topLevelRootOrStore says which of root and store are set beside a
// roots: list, with their values and variables, or returns nil.
func (c *Config) topLevelRootOrStore() error {
	var set, keys, envs []string
	for _, k := range []struct{ key, val string }{{"root", c.Root}, {"store", c.Store}} {
		if k.val != "" && (k.key != "root" || k.val != DefaultRoot) {
			set, keys, envs = append(set, fmt.Sprintf("%s (%s)", k.key, k.val)), append(keys, k.key), append(envs, EnvName(k.key))
		}
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("set together with %s: with a roots: list every root and its store go in the list; remove %s from the top level, the environment (%s) and the flags",
		strings.Join(set, " and "), strings.Join(keys, " and "), strings.Join(envs, ", "))
}
