package config

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
)

// revealed is every setting of c as text, secrets revealed.
func revealed(c *Config) []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.key + "=" + s.get(c)
	}
	return out
}

// differ lists the settings of got (revealed) that want has otherwise,
// as "got (want)".
func differ(got, want []string) []string {
	var out []string
	for i := range got {
		if got[i] != want[i] {
			out = append(out, fmt.Sprintf("%s (%s)", got[i], want[i]))
		}
	}
	return out
}

// yamlReading applies data to the defaults as yaml.v3 decodes its
// top-level values into strings (a list into strings, joined with
// commas): the reference the file loader must agree with on what each
// value says.
func yamlReading(data []byte) (*Config, error) {
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	c := DefaultConfig()
	for key, node := range doc {
		s, ok := lookup(key)
		if !ok {
			return nil, fmt.Errorf("unknown key %q", key)
		}
		var text string
		if err := node.Decode(&text); err != nil {
			var list []string
			if err := node.Decode(&list); err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
			text = strings.Join(list, ",")
		}
		if err := s.set(c, text); err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
	}
	return c, nil
}

// FuzzParse: the loader never panics and fails without changing the
// config; whatever it accepts is what yaml.v3 reads each value as (no tag
// or form makes it take a value the file does not mean), and survives a
// round trip through the file format, whose encoding is canonical.
func FuzzParse(f *testing.F) {
	var seeds []fuzztest.Seed
	for _, s := range [][2]string{
		{"empty", ""}, {"zk", "zk: a:1\n"}, {"zk-list", "zk: [a:1, b:2]\nroot: /x\n"}, {"numbers", "runway: 5s\nmin_reserve: 3\n"},
		{"example", string(encodeYAML(exampleConfig()))}, {"alias-unknown", "a: &x [1]\nb: *x\n"}, {"list", "- 1\n"},
		{"two-documents", "root: /a\n---\n"}, {"binary", "zk: !!binary aGVsbG8=\n"}, {"complex-key", "? [a]\n: b\n"},
		{"null", "store: ~\n"}, {"mapping", "http: {a: b}\n"}, {"binary-id", "id: !!binary cjE=\n"},
		{"local-tag", "id: !local r1\n"}, {"hex", "id: 0x1F\nmin_reserve: 0x10\n"}, {"alias", "id: &a r1\nadvertise: *a\n"},
		{"binary-element", "zk: [a:1, !!binary Yjoy]\n"}, {"merge", "<<: {id: r1}\n"}, {"yes", "create_bucket: yes\n"},
		{"empty-element", "zk: [a:1, '']\n"}, {"secret", "http_admin_token: adm\n"}, {"repeated", "id: r1\nid: r2\n"},
	} {
		seeds = append(seeds, fuzztest.New(s[0], []byte(s[1])))
	}
	fuzztest.Corpus(f, seeds...)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := DefaultConfig()
		before := revealed(c)
		if err := c.Parse("fuzz.yaml", data); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			if !slices.Equal(revealed(c), before) {
				t.Fatalf("failed Parse changed the config")
			}
			return
		}
		v := *c // Validate fills the derived paths in
		_ = v.Validate()
		ref, err := yamlReading(data)
		if err != nil || !slices.Equal(revealed(ref), revealed(c)) {
			t.Fatalf("accepted %q, but yaml.v3 reads it otherwise: %v %v", data, differ(revealed(c), revealed(ref)), err)
		}
		enc := encodeYAML(c)
		d := DefaultConfig()
		if err := d.Parse("rt.yaml", enc); err != nil {
			t.Fatalf("accepted %q but not its re-encoding:\n%s\n%v", data, enc, err)
		}
		if !slices.Equal(revealed(d), revealed(c)) {
			t.Fatalf("round trip of %q: %v", data, differ(revealed(d), revealed(c)))
		}
		if again := encodeYAML(d); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not canonical:\n%s\nthen\n%s", enc, again)
		}
	})
}
