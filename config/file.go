package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/seqkeeper/seqkeeper/internal/suggest"
)

// maxFileSize bounds a config file; a real one is a few hundred bytes.
const maxFileSize = 1 << 20

// LoadFile overlays the settings in the YAML file at path onto c. See Parse
// for the format.
func (c *Config) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: config file: %v (check --config and %s)", ErrInvalid, err, EnvConfigFile)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return fmt.Errorf("%w: config file %s: %v", ErrInvalid, path, err)
	}
	if len(data) > maxFileSize {
		return fmt.Errorf("%w: config file %s is larger than %d bytes; is it the right file?", ErrInvalid, path, maxFileSize)
	}
	return c.Parse(path, data)
}

// Parse overlays the settings in YAML data onto c; name (the file's path)
// only labels errors. The file is one mapping of setting keys (see Keys) to
// values, using the same names as the flags with '_' for '-':
//
//	zk: zoo1:2181,zoo2:2181   # or a list: [zoo1:2181, zoo2:2181]
//	zk_session_timeout: 10s
//	store: s3://ids/prod?endpoint=http://minio:9000&region=us-east-1
//	http: 0.0.0.0:7070
//	http_token_file: /run/secrets/seqkeeper-token
//
// Parsing is strict: an unknown or repeated key, a value of the wrong type,
// a nested mapping or a second document is an error naming the file, the
// line and the key, every bad line at once (errors.Join); nothing of c is
// changed then. An empty file sets
// nothing. Every error wraps ErrInvalid.
func (c *Config) Parse(name string, data []byte) error {
	errorf := func(line int, format string, args ...any) error {
		where := "config file " + name
		if line > 0 {
			where += fmt.Sprintf(": line %d", line)
		}
		return fmt.Errorf("%w: %s: %s", ErrInvalid, where, fmt.Sprintf(format, args...))
	}
	root, err := decodeMapping(data, errorf)
	if root == nil || err != nil {
		return err
	}
	next := *c // applied to c only if the whole file is good
	if errs := next.setAll(root, errorf); len(errs) > 0 {
		return errors.Join(errs...)
	}
	*c = next
	return nil
}

// decodeMapping decodes data, which must hold one YAML document, and
// returns its top-level mapping, or nil and no error when the document is
// empty (or only comments, or null). errorf makes an error about a line of
// the file (0: the file as a whole).
func decodeMapping(data []byte, errorf func(line int, format string, args ...any) error) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty, or only comments
		}
		return nil, errorf(0, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, errorf(extra.Line, "a second YAML document ('---'): put every setting in one mapping")
	case !errors.Is(err, io.EOF):
		return nil, errorf(0, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, errorf(root.Line, "want 'key: value' lines (a mapping), found %s", kindName(root))
	}
	return root, nil
}

// setAll sets in c every key of the mapping root, and returns a problem
// for every bad line (errorf makes each): a key that is not a plain
// setting name, unknown or repeated, a value of the wrong type, and root
// or store beside a roots: list. c is partly set when there are problems.
func (c *Config) setAll(root *yaml.Node, errorf func(line int, format string, args ...any) error) []error {
	seen := map[string]int{} // the line of each key set
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			errs = append(errs, errorf(k.Line, "keys must be plain setting names, found %s", kindName(k)))
			continue
		}
		key := k.Value
		if prev, dup := seen[key]; dup {
			errs = append(errs, errorf(k.Line, "key %q repeated (first at line %d): give each setting once", key, prev))
			continue
		}
		if key == "roots" {
			seen[key] = k.Line
			roots, rerrs := parseRoots(v, errorf)
			c.Roots = roots
			errs = append(errs, rerrs...)
			continue
		}
		s, ok := lookup(key)
		if !ok {
			errs = append(errs, errorf(k.Line, "unknown key %q%s", key, didYouMean(key)))
			continue
		}
		seen[key] = k.Line
		text, err := scalarText(s, v)
		if err == nil {
			err = s.set(c, text)
		}
		if err != nil {
			errs = append(errs, errorf(v.Line, "%s: %v", key, err))
		}
	}
	if line, ok := seen["roots"]; ok {
		for _, key := range []string{"root", "store"} {
			if l, set := seen[key]; set {
				errs = append(errs, errorf(l, "%s is set beside roots: (line %d): with a roots: list each root and its store go in the list; move %s into an entry, or remove roots: to serve one root", key, line, key))
			}
		}
	}
	return errs
}

// scalarText returns the text of value v for setting s: a scalar, or for a
// list setting also a sequence of scalars (joined with its separator).
func scalarText(s setting, v *yaml.Node) (string, error) {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if err := binary(v); err != nil {
		return "", err
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			if s.typ == "string" || s.typ == "secret" || s.typ == "list" {
				return "", nil
			}
			return "", fmt.Errorf("no value; give one or remove the line")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		if s.typ != "list" {
			return "", fmt.Errorf("want a single value, found a list")
		}
		parts := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			if e.Kind == yaml.AliasNode && e.Alias != nil {
				e = e.Alias
			}
			if e.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("list elements must be single values, found %s", kindName(e))
			}
			if err := binary(e); err != nil {
				return "", err
			}
			if strings.Contains(e.Value, s.sep) {
				return "", fmt.Errorf("list element %q contains %q, which separates the elements", e.Value, s.sep)
			}
			parts = append(parts, e.Value)
		}
		return strings.Join(parts, s.sep), nil
	}
	return "", fmt.Errorf("want a value, found %s", kindName(v))
}

// binary refuses a value tagged !!binary: its text is base64, and the
// value it means is the decoded bytes, which a setting would not get
// ("zk: !!binary aGVsbG8=" would be read as the server aGVsbG8=; FuzzParse
// holds it).
func binary(v *yaml.Node) error {
	if v.ShortTag() == "!!binary" {
		return fmt.Errorf("a !!binary value: write the text itself")
	}
	return nil
}

// didYouMean points at the setting the user probably meant.
func didYouMean(key string) string {
	norm := strings.ToLower(strings.NewReplacer("-", "_", ".", "_").Replace(key))
	if _, ok := lookup(norm); ok {
		return fmt.Sprintf(": did you mean %q?", norm)
	}
	if hint := suggest.Phrase(suggest.Closest(norm, Keys()), strconv.Quote); hint != "" {
		return hint
	}
	return fmt.Sprintf(": known keys are %s", strings.Join(Keys(), ", "))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}
