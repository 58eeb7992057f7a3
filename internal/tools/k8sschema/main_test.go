package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A swagger document with what the real one has: a kind with a
// group-version-kind, references, a recursive type, an int-or-string and
// a quantity, and a map.
const swagger = `{"definitions": {
  "io.k8s.api.apps.v1.Deployment": {
    "type": "object",
    "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Deployment", "version": "v1"}],
    "properties": {
      "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}}
    }
  },
  "io.k8s.api.apps.v1.DeploymentSpec": {
    "type": "object",
    "description": "dropped",
    "properties": {
      "replicas": {"type": "integer"},
      "maxUnavailable": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
      "memory": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
      "props": {"$ref": "#/definitions/io.k8s.JSONSchemaProps"}
    }
  },
  "io.k8s.JSONSchemaProps": {
    "type": "object",
    "properties": {"not": {"$ref": "#/definitions/io.k8s.JSONSchemaProps"}}
  },
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
  "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
  "io.k8s.api.core.v1.Service": {
    "type": "object",
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Service", "version": "v1"}],
    "properties": {"kind": {"type": "string"}}
  }
}}`

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor}
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          description: dropped
          properties:
            spec:
              type: object
              properties:
                port: {x-kubernetes-int-or-string: true}
                endpoints:
                  type: array
                  items:
                    type: object
                    properties: {interval: {type: string}}
                free:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties: {known: {type: string}}
`

func readSchema(t *testing.T, path string) object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s object
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s object, path ...string) object {
	t.Helper()
	for _, p := range path {
		next, ok := s[p].(object)
		if !ok {
			t.Fatalf("no %q in %v (path %v)", p, s, path)
		}
		s = next
	}
	return s
}

var intOrString = object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}}

func TestSwaggerSchemasAreStrictAndInlined(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "swagger.json")
	if err := os.WriteFile(in, []byte(swagger), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(in, nil, out); err != nil {
		t.Fatal(err)
	}
	// kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json: the group's
	// first label, none for the core group.
	dep := readSchema(t, filepath.Join(out, "deployment-apps-v1.json"))
	readSchema(t, filepath.Join(out, "service-v1.json"))

	if dep["additionalProperties"] != false {
		t.Errorf("the kind's object accepts unknown fields: %v", dep["additionalProperties"])
	}
	spec := get(t, dep, "properties", "spec")
	if spec["additionalProperties"] != false || spec["$ref"] != nil {
		t.Errorf("spec not inlined strictly: %v", spec)
	}
	if _, ok := spec["description"]; ok {
		t.Error("descriptions are kept")
	}
	if got := get(t, spec, "properties", "maxUnavailable"); !reflect.DeepEqual(got, intOrString) {
		t.Errorf("IntOrString = %v", got)
	}
	if got := get(t, spec, "properties", "memory"); !reflect.DeepEqual(got, object{"oneOf": []any{object{"type": "string"}, object{"type": "number"}}}) {
		t.Errorf("Quantity = %v", got)
	}
	// A map keeps its value schema, and is not made strict.
	if got := get(t, dep, "properties", "labels", "additionalProperties"); got["type"] != "string" {
		t.Errorf("map values = %v", got)
	}
	// The recursion ends in an open schema instead of looping.
	if got := get(t, spec, "properties", "props", "properties", "not"); len(got) != 0 {
		t.Errorf("recursive reference = %v, want {}", got)
	}
}

func TestCRDSchemasAreStrict(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(in, []byte(crd), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run("", []string{in}, out); err != nil {
		t.Fatal(err)
	}
	s := readSchema(t, filepath.Join(out, "servicemonitor-monitoring-v1.json"))
	spec := get(t, s, "properties", "spec")
	for name, o := range map[string]object{
		"root":        s,
		"spec":        spec,
		"endpoints[]": get(t, spec, "properties", "endpoints", "items"),
	} {
		if o["additionalProperties"] != false {
			t.Errorf("%s accepts unknown fields", name)
		}
	}
	if got := get(t, spec, "properties", "port"); !reflect.DeepEqual(got, intOrString) {
		t.Errorf("int-or-string = %v", got)
	}
	if _, set := get(t, spec, "properties", "free")["additionalProperties"]; set {
		t.Error("x-kubernetes-preserve-unknown-fields made strict")
	}
}

func TestNotACRD(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.yaml")
	if err := os.WriteFile(in, []byte("kind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("", []string{in}, filepath.Join(dir, "out")); err == nil {
		t.Fatal("a ConfigMap was taken for a CRD")
	}
}
