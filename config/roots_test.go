package config

import (
	"errors"
	"strings"
	"testing"
)

// parseRoots parses a config file and validates it.
func resolveText(t *testing.T, text string) (*Config, error) {
	t.Helper()
	c := DefaultConfig()
	if err := c.Parse("roots.yaml", []byte(text)); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

func TestRootsListParsesAndDerives(t *testing.T) {
	c, err := resolveText(t, `
zk: [z1:2181]
http: 127.0.0.1:7070
roots:
  - root: /seqkeeper/orders
    store: s3://ids/orders?region=eu-west-1
  - name: bill
    root: /seqkeeper/billing/sequences
    store: s3://ids/billing
    election_path: /elections/billing
  - root: /legacy/sequences
    store: file:///var/lib/seqkeeper/legacy
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.RootNames(), ","); got != "orders,bill,sequences" {
		t.Fatalf("names %q; want orders,bill,sequences", got)
	}
	o := c.ForRoot("orders")
	wantE, wantM := DerivedPaths("/seqkeeper/orders")
	if o.Root != "/seqkeeper/orders" || o.Store != "s3://ids/orders?region=eu-west-1" || o.ElectionPath != wantE || o.MarkerPath != wantM ||
		!o.PathDerived("election_path") || !o.PathDerived("marker_path") || len(o.Roots) != 0 || o.HTTP != "127.0.0.1:7070" {
		t.Fatalf("ForRoot(orders) = root %s store %s election %s marker %s derived %v/%v roots %d http %s",
			o.Root, o.Store, o.ElectionPath, o.MarkerPath, o.PathDerived("election_path"), o.PathDerived("marker_path"), len(o.Roots), o.HTTP)
	}
	b := c.ForRoot("bill")
	if b.ElectionPath != "/elections/billing" || b.PathDerived("election_path") || !b.PathDerived("marker_path") {
		t.Fatalf("ForRoot(bill): election %s derived %v; want the explicit path, not derived", b.ElectionPath, b.PathDerived("election_path"))
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("a root's own config does not validate: %v", err)
	}
	if c.ForRoot("nope") != nil {
		t.Fatal("ForRoot of an unknown name is not nil")
	}
}

func TestRootsListErrors(t *testing.T) {
	const top = "zk: [z1:2181]\n"
	for _, tc := range []struct{ name, text, want string }{
		{"root beside roots", top + "root: /x\nroots:\n  - {root: /a, store: file:///a}\n", "line 2: root is set beside roots: (line 3)"},
		{"store beside roots", top + "store: file:///s\nroots:\n  - {root: /a, store: file:///a}\n", "store is set beside roots:"},
		{"not a list", top + "roots: /a\n", "roots: want a list of roots"},
		{"empty list", top + "roots: []\n", "roots: an empty list"},
		{"entry not a mapping", top + "roots:\n  - /a\n", "entry 1: want a mapping"},
		{"unknown key", top + "roots:\n  - {root: /a, store: file:///a, runway: 5s}\n", `entry 1: unknown key "runway": an entry takes only name, root, store, election_path, marker_path`},
		{"no store", top + "roots:\n  - {root: /a}\n", "entry 1 has no store"},
		{"no root", top + "roots:\n  - {store: file:///a}\n", "entry 1 has no root"},
		{"repeated key", top + "roots:\n  - {root: /a, root: /b, store: file:///a}\n", `key "root" repeated`},
		{"duplicate root", top + "roots:\n  - {root: /a, store: file:///a}\n  - {name: b, root: /a, store: file:///b}\n", "entries 1 and 2 both serve root /a"},
		{"duplicate name", top + "roots:\n  - {root: /x/ids, store: file:///a}\n  - {root: /y/ids, store: file:///b}\n", `entries 1 and 2 are both named "ids"`},
		{"bad name", top + "roots:\n  - {name: a/b, root: /a, store: file:///a}\n", `name "a/b": want 1 to 63 letters`},
		{"same store", top + "roots:\n  - {root: /a, store: \"s3://b/p?region=x\"}\n  - {root: /b, store: s3://b/p/}\n", "entries 1 and 2 share a store"},
		{"store inside another", top + "roots:\n  - {root: /a, store: file:///s}\n  - {root: /b, store: file:///s/b}\n", "share a store"},
		{"bad store", top + "roots:\n  - {root: /a, store: ftp://x}\n", `entry 1 (a): store "ftp://x": bad store URL: unsupported scheme "ftp"`},
		{"root under another", top + "roots:\n  - {root: /a, store: file:///a}\n  - {root: /a/b, store: file:///b}\n", "entry 1 (a) root /a and entry 2 (b) root /a/b contain one another"},
		{"same election", top + "roots:\n  - {root: /a, store: file:///a, election_path: /e}\n  - {root: /b, store: file:///b, election_path: /e}\n", "entry 1 (a) election_path and entry 2 (b) election_path are both /e"},
		{"same marker", top + "roots:\n  - {root: /a, store: file:///a, marker_path: /m}\n  - {root: /b, store: file:///b, marker_path: /m}\n", "marker_path are both /m"},
		{"election_path beside roots", top + "election_path: /e\nroots:\n  - {root: /a, store: file:///a}\n", "roots: set together with election_path (/e), which every root would ignore"},
		{"election under a root", top + "roots:\n  - {root: /a, store: file:///a, election_path: /b/e}\n  - {root: /b, store: file:///b}\n", "contain one another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolveText(t, tc.text)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// A root or store from the environment or a flag conflicts with the list
// as one in the file does.
func TestRootsListRefusesRootFromTheEnvironment(t *testing.T) {
	c := DefaultConfig()
	if err := c.Parse("roots.yaml", []byte("zk: [z1:2181]\nroots:\n  - {root: /a, store: file:///a}\n")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SEQKEEPER_STORE": "file:///s"}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "roots: set together with store (file:///s)") ||
		!strings.Contains(err.Error(), "the environment (SEQKEEPER_STORE)") || strings.Contains(err.Error(), DefaultRoot) {
		t.Fatalf("Validate = %v; want the conflict with store named, and its variable, not the default root", err)
	}
	c = DefaultConfig()
	if err := c.Parse("roots.yaml", []byte("zk: [z1:2181]\nroots:\n  - {root: /a, store: file:///a}\n")); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"SEQKEEPER_MARKER_PATH": "/m"}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "roots: set together with marker_path (/m), which every root would ignore") || !strings.Contains(err.Error(), "SEQKEEPER_MARKER_PATH") {
		t.Fatalf("Validate = %v; want the conflict with marker_path named, and its variable", err)
	}
}

func TestDefaultRootName(t *testing.T) {
	for root, want := range map[string]string{
		"/seqkeeper/orders": "orders", "/a/b c": "b-c", "/x/.hidden": "hidden", "/x/Ünï": "n--",
	} {
		if got := DefaultRootName(root); got != want {
			t.Errorf("DefaultRootName(%q) = %q; want %q", root, got, want)
		}
	}
}

// The example of several roots loads and validates as it is.
func TestExampleRootsConfig(t *testing.T) {
	c := DefaultConfig()
	err := c.LoadFile("../examples/config/roots.yaml")
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatalf("examples/config/roots.yaml: %v", err)
	}
	if got := strings.Join(c.RootNames(), ","); got != "orders,billing,legacy" {
		t.Fatalf("names %s; want orders,billing,legacy", got)
	}
	if l := c.ForRoot("legacy"); l.ElectionPath != "/legacy/election" || l.PathDerived("election_path") {
		t.Fatalf("legacy election path %s (derived %v); want the explicit /legacy/election", l.ElectionPath, l.PathDerived("election_path"))
	}
}
