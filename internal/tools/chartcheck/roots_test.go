package chartcheck

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/seqkeeper/seqkeeper/config"
)

// zkServers is the ensemble the tests' values name.
var zkServers = []any{"zk-0.zk:2181", "zk-1.zk:2181", "zk-2.zk:2181"}

// root is one entry of the chart's roots value, and what seqkeeper must
// make of it.
type root struct {
	name, root, store, electionPath, markerPath string
}

func (r root) value() map[string]any {
	v := map[string]any{"name": r.name, "root": r.root}
	for k, s := range map[string]string{"store": r.store, "electionPath": r.electionPath, "markerPath": r.markerPath} {
		if s != "" {
			v[k] = s
		}
	}
	return v
}

// defaultStore is the top-level store, which a root without one takes.
const defaultStore = "s3://ids/default?region=eu-west-1"

// threeRoots are roots as a user lists them: one with its own store, one
// taking the top-level store, one keeping paths set by hand.
var threeRoots = []root{
	{name: "orders", root: "/seqkeeper/orders/sequences", store: "s3://ids/orders?region=eu-west-1"},
	{name: "billing", root: "/seqkeeper/billing/sequences"},
	{name: "legacy", root: "/legacy-sequences", store: "s3://ids/legacy?region=eu-west-1&sse_kms_key_id=alias/ids",
		electionPath: "/legacy/election", markerPath: "/legacy/cluster"},
}

// severalRootsValues are values with roots, every Secret and TLS, so that
// every variable the Deployment can set is set.
func severalRootsValues(roots []root) map[string]any {
	var list []any
	for _, r := range roots {
		list = append(list, r.value())
	}
	return map[string]any{
		"store": defaultStore,
		"roots": list,
		"zookeeper": map[string]any{
			"servers": zkServers,
			"tls":     map[string]any{"existingSecret": "zk-tls", "serverName": "zookeeper.ids.internal"},
			"digest":  map[string]any{"existingSecret": "zk-digest"},
		},
		"auth":    map[string]any{"admin": map[string]any{"existingSecret": "admin"}},
		"httpTLS": map[string]any{"existingSecret": "http-tls"},
		"extraEnv": []any{
			map[string]any{"name": "SEQKEEPER_RUNWAY", "value": "2m"},
		},
		"podAnnotations": map[string]any{"example.com/team": "ids"},
	}
}

// TestSeveralRootsAreOneDeploymentReadingTheirConfigFile renders the chart
// with three roots and loads what its pods would load: the ConfigMap's
// file at the path SEQKEEPER_CONFIG names, with the Deployment's
// environment, through seqkeeper's own config package. The roots must come
// out as given (the election and marker paths derived from root where not
// given), on one Deployment, Service and PodDisruptionBudget.
func TestSeveralRootsAreOneDeploymentReadingTheirConfigFile(t *testing.T) {
	r := mustRender(t, severalRootsValues(threeRoots))
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "ServiceAccount"} {
		if o := r.only(t, kind, nil); o.Metadata.Name != release {
			t.Errorf("%s is named %s; want %s, one for every root", kind, o.Metadata.Name, release)
		}
	}
	for _, o := range r.objects {
		if _, ok := o.Metadata.Labels["seqkeeper.io/root"]; ok {
			t.Errorf("%s %s has a seqkeeper.io/root label: no object is a root's own", o.Kind, o.Metadata.Name)
		}
	}
	var d appsv1.Deployment
	var cm corev1.ConfigMap
	r.only(t, "Deployment", &d)
	r.only(t, "ConfigMap", &cm)
	c := container(t, &d)
	env := podEnv(t, c)
	_, file := configFile(t, &d, c, &cm, env)

	cfg, err := config.Resolve(file, lookup(env), nil)
	if err != nil {
		t.Fatalf("seqkeeper refuses the chart's config file with the Deployment's environment: %v\nenvironment:%s", err, describe(env))
	}
	if len(cfg.Roots) != len(threeRoots) {
		t.Fatalf("seqkeeper read %d roots (%v); want %d", len(cfg.Roots), cfg.RootNames(), len(threeRoots))
	}
	for i, want := range threeRoots {
		got := cfg.Roots[i]
		if want.store == "" {
			want.store = defaultStore
		}
		derivedE, derivedM := config.DerivedPaths(want.root)
		if want.electionPath == "" {
			want.electionPath = derivedE
		}
		if want.markerPath == "" {
			want.markerPath = derivedM
		}
		if got.Name != want.name || got.Root != want.root || got.Store != want.store ||
			got.ElectionPath != want.electionPath || got.MarkerPath != want.markerPath {
			t.Errorf("root %d: seqkeeper read name %q root %q store %q election %q marker %q;\nwant name %q root %q store %q election %q marker %q",
				i+1, got.Name, got.Root, got.Store, got.ElectionPath, got.MarkerPath,
				want.name, want.root, want.store, want.electionPath, want.markerPath)
		}
		if rc := cfg.ForRoot(want.name); rc == nil || rc.Validate() != nil {
			t.Errorf("root %s: its own configuration (ForRoot) does not validate", want.name)
		}
	}
	// The shared settings stay the Deployment's variables.
	if got := strings.Join(cfg.ZK, ","); got != "zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181" {
		t.Errorf("zk %s; want the values' servers", got)
	}
	if cfg.ID != podName || cfg.AdvertiseAddr() != podIP+":7070" || cfg.HTTP != "0.0.0.0:7070" {
		t.Errorf("id %s advertise %s http %s; want the pod's name, its IP:7070, 0.0.0.0:7070", cfg.ID, cfg.AdvertiseAddr(), cfg.HTTP)
	}
	if cfg.Runway.String() != "2m0s" || cfg.ZKTLSCAFile == "" || cfg.ZKDigest.Reveal() != secret || cfg.HTTPTokenFile == "" {
		t.Errorf("runway %s, zk tls ca file %q, digest set %v, token file %q: the Deployment's shared settings did not all arrive",
			cfg.Runway, cfg.ZKTLSCAFile, cfg.ZKDigest.Reveal() != "", cfg.HTTPTokenFile)
	}
	for _, k := range []string{"SEQKEEPER_ROOT", "SEQKEEPER_STORE", "SEQKEEPER_ELECTION_PATH", "SEQKEEPER_MARKER_PATH"} {
		if _, ok := env[k]; ok {
			t.Errorf("the Deployment sets %s beside the roots: list", k)
		}
	}
}

// podAnnotations returns the pod template's annotations of the chart
// rendered with values.
func podAnnotations(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	var d appsv1.Deployment
	mustRender(t, values).only(t, "Deployment", &d)
	return d.Spec.Template.Annotations
}

// A change to the roots changes the pod template (the ConfigMap's
// checksum), so that the replicas roll onto it; the same roots do not.
func TestChangedRootsRollThePods(t *testing.T) {
	before := podAnnotations(t, severalRootsValues(threeRoots))
	if before["checksum/config"] == "" || before["example.com/team"] != "ids" {
		t.Fatalf("pod annotations %v; want checksum/config beside podAnnotations", before)
	}
	if again := podAnnotations(t, severalRootsValues(threeRoots)); again["checksum/config"] != before["checksum/config"] {
		t.Fatalf("the same roots rendered twice: checksum %s, then %s", before["checksum/config"], again["checksum/config"])
	}
	changed := append([]root(nil), threeRoots...)
	changed[1].store = "s3://ids/billing?region=eu-west-1"
	if after := podAnnotations(t, severalRootsValues(changed)); after["checksum/config"] == before["checksum/config"] {
		t.Fatalf("a root's store changed, the pod template's checksum did not (%s)", after["checksum/config"])
	}
}

// One root renders as it always did: no ConfigMap, no config file, the root
// and store in SEQKEEPER_ROOT and SEQKEEPER_STORE, which seqkeeper reads.
func TestOneRootKeepsItsEnvironment(t *testing.T) {
	r := mustRender(t, map[string]any{"store": defaultStore, "zookeeper": map[string]any{"servers": zkServers}})
	if n := r.count("ConfigMap"); n != 0 {
		t.Fatalf("one root rendered %d ConfigMaps; want none", n)
	}
	var d appsv1.Deployment
	r.only(t, "Deployment", &d)
	c := container(t, &d)
	if strings.Join(c.Args, " ") != "serve" {
		t.Fatalf("args %q; want serve", c.Args)
	}
	if _, ok := d.Spec.Template.Annotations["checksum/config"]; ok {
		t.Error("one root's pod template has a checksum/config annotation")
	}
	env := podEnv(t, c)
	cfg, err := config.Resolve("", lookup(env), nil)
	if err != nil {
		t.Fatalf("seqkeeper refuses the Deployment's environment: %v", err)
	}
	if len(cfg.Roots) != 0 || cfg.Root != "/all-sequences" || cfg.Store != defaultStore {
		t.Fatalf("roots %v root %s store %s; want the one root /all-sequences on %s", cfg.RootNames(), cfg.Root, cfg.Store, defaultStore)
	}
}

// The chart refuses what seqkeeper would: several roots beside a root or
// store in extraEnv, roots sharing a store; and the notes address the
// roots by name.
func TestSeveralRootsRefusalsAndNotes(t *testing.T) {
	v := severalRootsValues(threeRoots)
	v["extraEnv"] = []any{map[string]any{"name": "SEQKEEPER_STORE", "value": "file:///x"}}
	if _, err := render(t, v); err == nil || !strings.Contains(err.Error(), "extraEnv sets SEQKEEPER_STORE") {
		t.Errorf("several roots with SEQKEEPER_STORE in extraEnv: %v; want it refused", err)
	}
	shared := append([]root(nil), threeRoots...)
	shared[0].store = ""
	if _, err := render(t, severalRootsValues(shared)); err == nil || !strings.Contains(err.Error(), `have the same store "`+defaultStore+`"`) {
		t.Errorf("two roots on the top-level store: %v; want it refused", err)
	}
	notes := mustRender(t, severalRootsValues(threeRoots)).notes
	for _, want := range []string{"/v1/roots/orders/sequences/orders/ids", "exec deploy/seqkeeper -- /seqkeeper --root-name orders create", "Service seqkeeper,"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes do not say %q:\n%s", want, notes)
		}
	}
}
