// Command dashboard writes seqkeeper's Grafana dashboard, built with
// Grafana's foundation SDK (not written by hand), to the file given:
// leadership and handovers, IDs per second, runways, the store (health,
// latency, writes), ZooKeeper (session, latency), raises and compactions,
// over the metrics of docs/metrics.md. It is a module of its own, so that
// the SDK stays out of seqkeeper's module graph. scripts/render-manifests.sh
// runs it into the chart (charts/seqkeeper/dashboards/seqkeeper.json),
// and scripts/validate-manifests.sh checks that the committed file is its
// fresh output; the container suite's TestAlertsFireInPrometheus runs
// every panel's query against a real Prometheus.
//
//	go run . FILE
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasource is the dashboard's Prometheus, chosen when it is imported
// (the ${datasource} variable).
var datasource = dashboard.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// query is one panel target: a PromQL expression and its legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource)
}

// series is a time series panel of the given unit.
func series(title, unit, description string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Unit(unit).Description(description).Datasource(datasource).Height(8).Span(12)
	for _, t := range targets {
		p = p.WithTarget(t)
	}
	return p
}

// single is a stat panel of one value.
func single(title, unit, description string, target *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Unit(unit).Description(description).Datasource(datasource).Height(4).Span(6).WithTarget(target)
}

func build() (dashboard.Dashboard, error) {
	const rate = "[$__rate_interval]"
	return dashboard.NewDashboardBuilder("seqkeeper").
		Uid("seqkeeper").
		Tags([]string{"seqkeeper"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")).
		WithRow(dashboard.NewRowBuilder("Leadership and IDs")).
		WithPanel(single("Primaries", "none", "Replicas that say they lead, per root: 1 is right, 0 means no primary raises ceilings, 2 a broken election.",
			query(`sum by (root) (seqkeeper_leader)`, "{{root}}"))).
		WithPanel(single("Sequences", "none", "Sequences the primary maintains.",
			query(`sum(seqkeeper_sequences)`, "sequences"))).
		WithPanel(single("Shortest runway", "s", "How long the reserve of the sequence that runs out first lasts at its rate (exhausted sequences apart).",
			query(`min(seqkeeper_runway_min_seconds)`, "runway"))).
		WithPanel(single("Store healthy", "none", "1 when the store answered each replica's last request.",
			query(`min(seqkeeper_store_healthy)`, "store"))).
		WithPanel(series("Handovers", "none", "Terms started and ended, by how (elected, resigned, lost, a crashed leader's node deleted).",
			query(`sum by (event) (increase(seqkeeper_leadership_changes_total`+rate+`))`, "{{event}}"))).
		WithPanel(series("IDs per second", "ops", "IDs the replicas' HTTP API answered, per replica.",
			query(`sum by (instance) (rate(seqkeeper_ids_served_total`+rate+`))`, "{{instance}}"))).
		WithRow(dashboard.NewRowBuilder("Runway")).
		WithPanel(series("Runway by sequence", "s", "The runway of each sequence, as a distribution over them: the median and the shortest decile; with metrics_top_sequences, the N shortest by name in seqkeeper_sequence_runway_seconds.",
			query(`histogram_quantile(0.5, sum by (le) (seqkeeper_runway_seconds_bucket))`, "median"),
			query(`histogram_quantile(0.1, sum by (le) (seqkeeper_runway_seconds_bucket))`, "shortest 10%"),
			query(`min(seqkeeper_runway_min_seconds)`, "shortest"))).
		WithPanel(series("Unhealthy and exhausted sequences", "none", "Unhealthy ones page (SeqkeeperUnhealthySequences); exhausted ones end there and page no one.",
			query(`max(seqkeeper_unhealthy_sequences)`, "unhealthy"),
			query(`max(seqkeeper_exhausted_sequences)`, "exhausted"))).
		WithRow(dashboard.NewRowBuilder("Store")).
		WithPanel(series("Store latency (p99)", "s", "The 99th percentile of store requests, by kind.",
			query(`histogram_quantile(0.99, sum by (le, op) (rate(seqkeeper_store_request_duration_seconds_bucket`+rate+`)))`, "{{op}}"))).
		WithPanel(series("Store writes", "ops", "The primary's store writes (each a batch of ceilings), ok and failed, and the PUTs they cost.",
			query(`sum by (result) (rate(seqkeeper_store_writes_total`+rate+`))`, "{{result}}"),
			query(`sum(rate(seqkeeper_store_requests_total{op=~"put|put_conflict"}`+rate+`))`, "PUTs"))).
		WithRow(dashboard.NewRowBuilder("ZooKeeper")).
		WithPanel(series("ZooKeeper session", "s", "How long each replica has had no ZooKeeper session (0 with one).",
			query(`max by (instance) (seqkeeper_zookeeper_disconnected_seconds)`, "{{instance}}"))).
		WithPanel(series("ZooKeeper latency (p99)", "s", "The 99th percentile of ZooKeeper requests, by operation.",
			query(`histogram_quantile(0.99, sum by (le, op) (rate(seqkeeper_zookeeper_request_duration_seconds_bucket`+rate+`)))`, "{{op}}"))).
		WithRow(dashboard.NewRowBuilder("The primary's work")).
		WithPanel(series("Raises", "ops", "Ceilings raised in ZooKeeper after the store accepted them, and sequences fast-forwarded.",
			query(`sum(rate(seqkeeper_primary_raises_total`+rate+`))`, "raises"),
			query(`sum(rate(seqkeeper_primary_revalidations_total`+rate+`))`, "revalidations"))).
		WithPanel(series("Compactions", "ops", "Compactions of the store's log, by result, and the segments they folded.",
			query(`sum by (result) (rate(seqkeeper_store_compactions_total`+rate+`))`, "{{result}}"),
			query(`sum(rate(seqkeeper_store_compacted_segments_total`+rate+`))`, "segments"))).
		Build()
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard FILE")
		os.Exit(2)
	}
	d, err := build()
	if err == nil {
		var b []byte
		if b, err = json.MarshalIndent(d, "", "  "); err == nil {
			err = os.WriteFile(os.Args[1], append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
