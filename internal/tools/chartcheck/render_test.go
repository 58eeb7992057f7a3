package chartcheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/seqkeeper/seqkeeper/config"
)

// chartDir is charts/seqkeeper, from this package's directory.
const chartDir = "../../../charts/seqkeeper"

// release is the release's name: the chart names its objects "seqkeeper".
const release = "seqkeeper"

// rendered is the chart rendered: its objects, and NOTES.txt.
type rendered struct {
	objects []object
	notes   string
}

// object is one rendered Kubernetes object.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	text string // the object's YAML
}

// render renders the chart as `helm install` would, with values over the
// chart's own (checked against values.schema.json first).
func render(t *testing.T, values map[string]any) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: release, Namespace: "ids", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		return rendered{}, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return rendered{}, err
	}
	var out rendered
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = text
			continue
		}
		for _, doc := range releaseutil.SplitManifests(text) {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if o.Kind == "" { // only comments
				continue
			}
			o.text = doc
			out.objects = append(out.objects, o)
		}
	}
	return out, nil
}

// mustRender is render that fails the test on an error.
func mustRender(t *testing.T, values map[string]any) rendered {
	t.Helper()
	r, err := render(t, values)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	return r
}

// only returns the one object of kind, strictly decoded into into (an
// unknown field is an error): there must be exactly one.
func (r rendered) only(t *testing.T, kind string, into any) object {
	t.Helper()
	var found []object
	for _, o := range r.objects {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, o := range found {
			names = append(names, o.Metadata.Name)
		}
		t.Fatalf("rendered %d objects of kind %s (%v); want one", len(found), kind, names)
	}
	if into != nil {
		if err := yaml.UnmarshalStrict([]byte(found[0].text), into); err != nil {
			t.Fatalf("%s %s: %v", kind, found[0].Metadata.Name, err)
		}
	}
	return found[0]
}

// count returns how many objects of kind were rendered.
func (r rendered) count(kind string) int {
	n := 0
	for _, o := range r.objects {
		if o.Kind == kind {
			n++
		}
	}
	return n
}

// container returns the Deployment's seqkeeper container.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "seqkeeper" {
		t.Fatalf("Deployment %s: containers %v; want one, seqkeeper", d.Name, cs)
	}
	return cs[0]
}

// Values of what Kubernetes resolves outside the manifest, as a pod of the
// Deployment would see them.
const (
	podName = "seqkeeper-5d8c7b9f4-x2x7q"
	podIP   = "10.1.2.3"
	secret  = "user:s3cret" // any Secret's key (the ZooKeeper digest is user:password)
)

// varRef is a $(VAR) reference in an EnvVar's value.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv is the container's environment as the kubelet makes it: fieldRefs
// and Secret keys resolved, $(VAR) references to earlier variables
// expanded, a later variable of the same name winning.
func podEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := env[varRef.FindStringSubmatch(ref)[1]]; ok {
					return v
				}
				return ref
			})
		case e.ValueFrom.FieldRef != nil:
			v, ok := map[string]string{"metadata.name": podName, "status.podIP": podIP}[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: fieldRef %s: not one this test resolves", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = secret
		default:
			t.Fatalf("env %s: valueFrom %+v: not one this test resolves", e.Name, e.ValueFrom)
		}
	}
	return env
}

// configFile finds the file the container's SEQKEEPER_CONFIG names (env,
// podEnv's), which serve and every operator command run in the pod read:
// a file of a mounted ConfigMap volume. It returns the file's contents,
// written to a temporary file, and its path there.
func configFile(t *testing.T, d *appsv1.Deployment, c corev1.Container, cm *corev1.ConfigMap, env map[string]string) (string, string) {
	t.Helper()
	file := env[config.EnvConfigFile]
	if file == "" || len(c.Args) != 1 || c.Args[0] != "serve" {
		t.Fatalf("args %q, %s %q: want serve, with %s naming the config file", c.Args, config.EnvConfigFile, file, config.EnvConfigFile)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(file) {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("volume %s at %s is not mounted read-only", m.Name, m.MountPath)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
				t.Fatalf("volume %s, mounted at %s, is not the ConfigMap %s: %+v", v.Name, m.MountPath, cm.Name, v.VolumeSource)
			}
			for _, it := range v.ConfigMap.Items {
				if it.Path != path.Base(file) {
					continue
				}
				data, ok := cm.Data[it.Key]
				if !ok {
					t.Fatalf("ConfigMap %s has no key %s (volume %s's item for %s)", cm.Name, it.Key, v.Name, file)
				}
				local := filepath.Join(t.TempDir(), path.Base(file))
				if err := os.WriteFile(local, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
				return data, local
			}
			t.Fatalf("volume %s lists no item %s", v.Name, path.Base(file))
		}
		t.Fatalf("no volume %s for the mount at %s", m.Name, m.MountPath)
	}
	t.Fatalf("no volume is mounted at %s, the directory of %s=%s", path.Dir(file), config.EnvConfigFile, file)
	return "", ""
}

// lookup is an os.LookupEnv over env.
func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// describe lists an environment for a failure message.
func describe(env map[string]string) string {
	var b strings.Builder
	for k, v := range env {
		fmt.Fprintf(&b, "\n  %s=%s", k, v)
	}
	return b.String()
}
