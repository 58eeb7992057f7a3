package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// The alerts of deploy/kubernetes/prometheusrule.yaml, evaluated by a real
// Prometheus scraping a real cluster: a healthy cluster under traffic
// fires nothing; with the store stopped, the store and runway alerts
// fire; with every replica stopped, the replica-down and no-primary
// alerts fire. Each rule's for: is a sixtieth of its own, at least 5 s (chartRules),
// so that the test takes a minute, not an hour; the expressions, labels
// and thresholds are the chart's as they are (promtool's unit tests,
// scripts/validate-manifests.sh, hold the for: durations). The replicas'
// runway is 20 s, so that the runway alert's 10 s is reached within
// seconds of the store going away, and stays away while it answers.
func TestAlertsFireInPrometheus(t *testing.T) {
	takeClusterSlot(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("the Prometheus server is missing: bash scripts/setup.sh installs it (Debian's prometheus package): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := NewCluster(ctx, t, Options{ZooKeepers: 1, ZooKeeperEnv: map[string]string{"ZOO_STANDALONE_ENABLED": "false"}, MinIO: true, Replicas: 2, ReplicaEnv: map[string]string{
		"SEQKEEPER_RUNWAY":         "20s",
		"SEQKEEPER_SWEEP_INTERVAL": "1s",
		"SEQKEEPER_AUDIT_INTERVAL": "3s",
	}})
	replicas := c.Replicas()
	code, out, err := replicas[0].Container.Exec(ctx, []string{"/seqkeeper", "create", "alerts"}, tcexec.Multiplexed())
	if b, _ := io.ReadAll(out); err != nil || code != 0 {
		t.Fatalf("seqkeeper create alerts: exit %d, %v: %s", code, err, b)
	}
	var targets []string
	for _, r := range replicas {
		targets = append(targets, r.Addr(ReplicaPort))
	}
	stop := takeThroughout(ctx, targets)
	defer stop()
	prom := startPrometheus(t, promBin, targets)

	// Healthy, under traffic: every target up and the sequence served,
	// then nothing fires for 30 s (pending is not firing).
	prom.waitFor(t, "both replicas scraped and the sequence served", time.Minute, func() (bool, string) {
		v, err := prom.query(`count(up{job="seqkeeper"} == 1) == 2 and on() sum(rate(seqkeeper_ids_served_total[10s])) > 0`)
		return err == nil && v, fmt.Sprint(err)
	})
	// Before its first scrapes (Prometheus's discovery hands the targets
	// over about 5 s after its start) SeqkeeperNoPrimary fires on
	// absent(seqkeeper_leader), as it should; it resolves at the first
	// evaluation of the rules that sees the data.
	seen := time.Now()
	prom.waitFor(t, "the rules evaluated on both replicas' data", time.Minute, func() (bool, string) {
		return prom.evaluatedSince(t, seen)
	})
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		firing := slices.DeleteFunc(prom.firing(t), func(name string) bool {
			if !slices.Contains(latencyAlerts, name) {
				return false
			}
			t.Logf("%s fires, and is not held to silence here: the latency it compares is %s", name, prom.raw(latencyOf(name)))
			return true
		})
		if len(firing) > 0 {
			t.Fatalf("a healthy cluster fires %v; the last minute of the targets' up, seqkeeper_leader and seqkeeper_runway_min_seconds: %s",
				firing, prom.raw(`{__name__=~"up|seqkeeper_leader|seqkeeper_runway_min_seconds"}[1m]`))
		}
	}
	// Every panel of the chart's dashboard shows data from this cluster.
	exprs, err := dashboardQueries(filepath.Join("..", "charts", "seqkeeper", "dashboards", "seqkeeper.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exprs {
		q := strings.ReplaceAll(e.expr, "$__rate_interval", "1m")
		if ok, err := prom.query(q); err != nil || !ok {
			t.Errorf("the dashboard's panel %q: %s returns no series (%v)", e.panel, q, err)
		}
	}
	t.Logf("the dashboard's %d queries return series", len(exprs))

	// The store stops: takes use up the reserve; the store's and the
	// runway's alerts fire.
	if err := c.MinIO.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	prom.waitFiring(t, 2*time.Minute, "SeqkeeperStoreUnhealthy", "SeqkeeperRunwayLow")
	if err := c.MinIO.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// Every replica stops: none is scraped, none leads.
	stop()
	for _, r := range replicas {
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	prom.waitFiring(t, time.Minute, "SeqkeeperReplicaDown", "SeqkeeperNoPrimary")
}

// takeThroughout takes IDs of "alerts" from the replicas at targets, 20
// every 20 ms, until stopped; failures are the point of the faults.
func takeThroughout(ctx context.Context, targets []string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		for i := 0; ctx.Err() == nil; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+targets[i%len(targets)]+"/v1/sequences/alerts/ids?count=20", nil)
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			sleep(ctx, 20*time.Millisecond)
		}
	})
	return func() { cancel(); wg.Wait() }
}

// prometheus is a Prometheus server of this test.
type prometheus struct{ url string }

// startPrometheus runs the Prometheus server at bin, scraping targets
// every second as job seqkeeper, with the chart's alert rules, their
// for: scaled down (see TestAlertsFireInPrometheus); it stops when the
// test ends.
func startPrometheus(t *testing.T, bin string, targets []string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := chartRules(filepath.Join("..", "deploy", "kubernetes", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\n"+
		"scrape_configs:\n  - job_name: seqkeeper\n    static_configs: [{targets: [%s]}]\n", strings.Join(quoted, ", "))
	for name, data := range map[string]string{"prometheus.yaml": cfg, "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yaml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log (the end):\n%s", b[max(0, len(b)-4000):])
		}
	})
	p := &prometheus{url: "http://" + addr}
	p.waitFor(t, "Prometheus ready", time.Minute, func() (bool, string) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// latencyAlerts are the rules that compare a latency with an absolute
// threshold. Their silence is a property of the deployment's hardware,
// which this test's machine does not promise: three clusters on two
// cores, each ZooKeeper's JVM started a minute before, and rule windows of
// 5 minutes (unscaled, unlike for:) that reach back to the start. A
// healthy cluster here fired SeqkeeperZooKeeperSlow once in a full run.
// Their expressions are held by promtool's unit tests
// (deploy/prometheus/alerts_test.yaml: each fires on a slow series and
// stays silent on a fast one), and the metrics they name by
// scripts/validate-manifests.sh.
var latencyAlerts = []string{"SeqkeeperZooKeeperSlow", "SeqkeeperStoreSlow"}

// latencyOf is the latency that the chart's rule name compares with its
// threshold: its expression, read from the chart, without the comparison.
func latencyOf(name string) string {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "prometheusrule.yaml"))
	if err != nil {
		return err.Error()
	}
	_, rest, _ := strings.Cut(string(b), "alert: "+name+"\n")
	_, expr, _ := strings.Cut(rest, "expr: ")
	expr, _, _ = strings.Cut(expr, "\n")
	if i := strings.LastIndex(expr, " > "); i > 0 {
		expr = expr[:i]
	}
	return expr
}

// chartRules is the rule file of the PrometheusRule at path (its spec,
// de-indented), each for: a sixtieth of its own and at least 5 s: 1m and
// 5m become 5s, 10m 10s, 1h 60s. At a scrape a second, a for: of one or
// two seconds let one late scrape on a loaded machine fire an alert (a
// healthy cluster fired SeqkeeperNoPrimary once and SeqkeeperRunwayLow
// once, in two of four full runs; the failure now prints the series); at
// the chart's durations and a production scrape interval, every alert
// spans several scrapes, and so does 5 s here.
func chartRules(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, spec, ok := strings.Cut(string(b), "\nspec:\n")
	if !ok {
		return "", fmt.Errorf("%s has no spec", path)
	}
	lines := strings.Split(spec, "\n")
	forLine := regexp.MustCompile(`^(\s*for: )(\d+)([mh])$`)
	for i, l := range lines {
		l = strings.TrimPrefix(l, "  ")
		if m := forLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			if m[3] == "h" {
				n *= 60
			}
			l = fmt.Sprintf("%s%ds", m[1], max(n, 5))
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n"), nil
}

// query reports whether the PromQL expression q returns any sample.
func (p *prometheus) query(q string) (bool, error) {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return false, fmt.Errorf("query %s: %s %v", q, r.Status, err)
	}
	return len(r.Data.Result) > 0, nil
}

// raw returns Prometheus's answer to q as it came, for a failure message.
func (p *prometheus) raw(q string) string {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// firing returns the names of the alerts Prometheus says fire.
func (p *prometheus) firing(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range r.Data.Alerts {
		if a.State == "firing" && !slices.Contains(names, a.Labels["alertname"]) {
			names = append(names, a.Labels["alertname"])
		}
	}
	slices.Sort(names)
	return names
}

// evaluatedSince reports whether every rule group was last evaluated after
// t.
func (p *prometheus) evaluatedSince(t *testing.T, since time.Time) (bool, string) {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/rules")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Name           string
				LastEvaluation time.Time
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return false, err.Error()
	}
	if len(r.Data.Groups) == 0 {
		t.Fatal("Prometheus has no rule groups: the chart's rules did not load")
	}
	for _, g := range r.Data.Groups {
		if !g.LastEvaluation.After(since) {
			return false, fmt.Sprintf("group %s last evaluated at %s", g.Name, g.LastEvaluation.Format(time.RFC3339Nano))
		}
	}
	return true, ""
}

// waitFiring waits until each of names fires.
func (p *prometheus) waitFiring(t *testing.T, limit time.Duration, names ...string) {
	t.Helper()
	p.waitFor(t, strings.Join(names, " and ")+" to fire", limit, func() (bool, string) {
		firing := p.firing(t)
		for _, n := range names {
			if !slices.Contains(firing, n) {
				return false, fmt.Sprintf("firing: %v", firing)
			}
		}
		t.Logf("firing: %v", firing)
		return true, ""
	})
}

func (p *prometheus) waitFor(t *testing.T, what string, limit time.Duration, ok func() (bool, string)) {
	t.Helper()
	var last string
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		var done bool
		if done, last = ok(); done {
			return
		}
	}
	t.Fatalf("%s: not within %s (last: %s)", what, limit, last)
}

// panelQuery is one query of a dashboard panel.
type panelQuery struct{ panel, expr string }

// dashboardQueries returns every panel target's expression of the
// dashboard JSON at path.
func dashboardQueries(path string) ([]panelQuery, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []panelQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, panelQuery{p.Title, tg.Expr})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no panel queries", path)
	}
	return out, nil
}
