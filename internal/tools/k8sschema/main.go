// Command k8sschema writes the JSON schemas kubeconform validates against,
// from sources the Go module proxy serves: the Kubernetes OpenAPI v2 spec
// (api/openapi-spec/swagger.json of the k8s.io/kubernetes module) and
// CustomResourceDefinitions (JSON or YAML). The schema registry kubeconform
// downloads from by default is on GitHub, which CI machines here cannot
// reach; scripts/validate-manifests.sh runs this instead.
//
//	go run ./internal/tools/k8sschema -swagger swagger.json -crd crd.json -out DIR
//
// Each kind gets DIR/<kind>-<group>-<version>.json (DIR/<kind>-<version>.json
// for the core group), kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json,
// with every $ref inlined. Objects that list their properties accept no
// other (kubeconform -strict catches misspelt fields); int-or-string and
// quantities accept a string or a number, as the API server does.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

func main() {
	swagger := flag.String("swagger", "", "Kubernetes OpenAPI v2 spec (swagger.json)")
	var crds multi
	flag.Var(&crds, "crd", "CustomResourceDefinition file, JSON or YAML (repeatable)")
	out := flag.String("out", "", "directory to write the schemas into")
	flag.Parse()
	if *out == "" || (*swagger == "" && len(crds) == 0) {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -out DIR [-swagger swagger.json] [-crd FILE]...")
		os.Exit(2)
	}
	if err := run(*swagger, crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func run(swagger string, crds []string, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	n := 0
	if swagger != "" {
		c, err := fromSwagger(swagger, out)
		if err != nil {
			return err
		}
		n += c
	}
	for _, f := range crds {
		c, err := fromCRD(f, out)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		n += c
	}
	fmt.Printf("k8sschema: %d schemas in %s\n", n, out)
	return nil
}

type object = map[string]any

// fileName is kubeconform's name for a kind's schema.
func fileName(kind, group, version string) string {
	suffix := "-" + version
	if group != "" {
		suffix = "-" + strings.Split(group, ".")[0] + "-" + version
	}
	return strings.ToLower(kind) + strings.ToLower(suffix) + ".json"
}

func fromSwagger(path, out string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var spec struct {
		Definitions map[string]object `json:"definitions"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := 0
	for name, def := range spec.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(object)
			kind, _ := gvk["kind"].(string)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			if kind == "" || version == "" {
				continue
			}
			s := inline(spec.Definitions, def, map[string]bool{name: true})
			if err := write(filepath.Join(out, fileName(kind, group, version)), s); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// inline returns s with every $ref replaced by its definition, made
// strict. A reference back into a definition being inlined (a recursive
// type) becomes an unconstrained schema.
func inline(defs map[string]object, s object, open map[string]bool) object {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		switch {
		case name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
			return object{"oneOf": []any{object{"type": "string"}, object{"type": "number"}}}
		case name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
			return object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}}
		case open[name] || defs[name] == nil:
			return object{}
		}
		open[name] = true
		defer delete(open, name)
		return inline(defs, defs[name], open)
	}
	out := make(object, len(s))
	for k, v := range s {
		switch k {
		case "properties":
			props := object{}
			for p, ps := range v.(object) {
				props[p] = inline(defs, ps.(object), open)
			}
			out[k] = props
		case "items", "additionalProperties":
			if o, ok := v.(object); ok {
				out[k] = inline(defs, o, open)
			} else {
				out[k] = v
			}
		case "x-kubernetes-group-version-kind", "description":
			// Not needed to validate; keeps the files small.
		default:
			out[k] = v
		}
	}
	if out["format"] == "int-or-string" {
		return object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}}
	}
	return strictObject(out)
}

// strictObject forbids properties an object does not list.
func strictObject(s object) object {
	if _, ok := s["properties"]; ok {
		if _, set := s["additionalProperties"]; !set && s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
	}
	return s
}

// fromCRD writes the schema of every version a CRD serves.
func fromCRD(path, out string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var crd object
	if err := yaml.Unmarshal(data, &crd); err != nil { // YAML is a superset of JSON
		return 0, err
	}
	spec, _ := crd["spec"].(object)
	group, _ := spec["group"].(string)
	names, _ := spec["names"].(object)
	kind, _ := names["kind"].(string)
	versions, _ := spec["versions"].([]any)
	if group == "" || kind == "" || len(versions) == 0 {
		return 0, fmt.Errorf("not a CustomResourceDefinition with spec.group, spec.names.kind and spec.versions")
	}
	n := 0
	for _, v := range versions {
		ver, _ := v.(object)
		name, _ := ver["name"].(string)
		schema, _ := ver["schema"].(object)
		root, _ := schema["openAPIV3Schema"].(object)
		if name == "" || root == nil {
			continue
		}
		if err := write(filepath.Join(out, fileName(kind, group, name)), strictTree(root)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// strictTree applies strictObject through a whole CRD schema.
func strictTree(s object) object {
	for _, k := range []string{"items", "additionalProperties"} {
		if o, ok := s[k].(object); ok {
			s[k] = strictTree(o)
		}
	}
	if props, ok := s["properties"].(object); ok {
		for p, ps := range props {
			if o, ok := ps.(object); ok {
				props[p] = strictTree(o)
			}
		}
	}
	delete(s, "description")
	if s["x-kubernetes-int-or-string"] == true {
		return object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}}
	}
	return strictObject(s)
}

func write(path string, s object) error {
	s["$schema"] = "http://json-schema.org/schema#"
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
