#!/usr/bin/env bash
# Validates what deploy/ and charts/ ship:
#
# - the Helm chart charts/seqkeeper: helm lint --strict with its default
#   values, and helm lint --strict and helm template with
#   ci/minimal-values.yaml and ci/full-values.yaml (several roots, TLS,
#   every Secret, the Prometheus Operator objects), the objects checked
#   with kubeconform as below; its values.schema.json rejecting a misspelt
#   key and a wrong type, and its own checks rejecting a missing store or
#   ZooKeeper and roots that share a setting; and, rendered with Helm's Go
#   packages (internal/tools/chartcheck, a module of its own), the config
#   file it writes for several roots loaded by seqkeeper's config package
#   with the Deployment's environment;
# - that deploy/kubernetes/{seqkeeper,servicemonitor,prometheusrule}.yaml
#   are what scripts/render-manifests.sh renders from the chart now;
# - the Kubernetes manifests in deploy/kubernetes (and examples/), with kubeconform in
#   strict mode (unknown fields are errors, a kind without a schema is an
#   error), against schemas made offline: kubeconform's default schema
#   registry is on GitHub, which CI cannot reach, so the schemas are
#   generated from the Kubernetes OpenAPI spec and the Prometheus Operator's
#   ServiceMonitor and PrometheusRule CRDs, all from the Go module proxy
#   (internal/tools/k8sschema), and cached under $SEQKEEPER_CACHE;
# - the alert rules: the rules of deploy/kubernetes/prometheusrule.yaml
#   are those of docs/operations.md, every metric they name is one
#   seqkeeper exports, promtool check rules passes, and promtool test rules
#   passes deploy/prometheus/alerts_test.yaml, which makes each alert fire
#   and shows a healthy cluster silent (promtool from Debian's prometheus
#   package, installed with apt-get when missing);
# - the systemd unit in deploy/systemd, with systemd-analyze verify and its
#   offline security score (installed with apt-get when missing).
#
#   bash scripts/validate-manifests.sh
#
# Each validator first proves it can fail: broken copies (a misspelt field,
# a wrong type, an unknown kind, a bad ServiceMonitor and PrometheusRule
# field, bad chart values, a stale manifest, an unhardened unit) must be
# rejected, for the expected reason. Helm is built from the Go module proxy
# (helm.sh/helm/v3, pinned in scripts/render-manifests.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECONFORM=github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
K8S=k8s.io/kubernetes@v1.31.4 # 17 MB download, api/openapi-spec/swagger.json
PROMOP=github.com/prometheus-operator/prometheus-operator@v0.79.2 # 4 MB, the CRDs
CACHE="${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}"
SCHEMAS="$CACHE/k8s-schemas/${K8S##*@}-promop-${PROMOP##*@}"
K8S_DIR=deploy/kubernetes

LOG_TAG=manifests
. scripts/lib.sh

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bin="$(go_tool log "$KUBECONFORM")" || die "could not install $KUBECONFORM"
helm="$(go_tool log "$(sed -n 's/^HELM=\([^ ]*\).*/\1/p' scripts/render-manifests.sh)")" ||
	die "could not install the Helm of scripts/render-manifests.sh"
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"

schemas_ready() {
	local k
	for k in deployment-apps-v1 statefulset-apps-v1 service-v1 secret-v1 serviceaccount-v1 \
		poddisruptionbudget-policy-v1 configmap-v1 servicemonitor-monitoring-v1 prometheusrule-monitoring-v1; do
		[[ -s "$SCHEMAS/$k.json" ]] || return 1
	done
}
if ! schemas_ready; then
	log "making the schemas from $K8S and $PROMOP (Go module proxy)"
	k8s="$(cd "$work" && go mod download -json "$K8S" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	promop="$(cd "$work" && go mod download -json "$PROMOP" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -d "$k8s" && -d "$promop" ]] || die "could not download $K8S and $PROMOP from the Go module proxy"
	rm -rf "$SCHEMAS.new"
	go run ./internal/tools/k8sschema -out "$SCHEMAS.new" \
		-swagger "$k8s/api/openapi-spec/swagger.json" \
		-crd "$promop/jsonnet/prometheus-operator/servicemonitors-crd.json" \
		-crd "$promop/jsonnet/prometheus-operator/prometheusrules-crd.json" >&2
	rm -rf "$SCHEMAS"
	mv "$SCHEMAS.new" "$SCHEMAS"
	schemas_ready || die "k8sschema did not write every schema the manifests need into $SCHEMAS"
fi

kubeconform() {
	"$bin" -strict -summary -schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}

# reject NAME SOURCE SED WANT: a copy of SOURCE edited by SED must change,
# and kubeconform must reject it with a message containing WANT.
reject() {
	local name="$1" src="$2" edit="$3" want="$4" out
	sed "$edit" "$src" >"$work/$name.yaml"
	cmp -s "$work/$name.yaml" "$src" && die "self-check $name: '$edit' did not change $src"
	if out="$(kubeconform "$work/$name.yaml" 2>&1)"; then
		die "self-check $name: kubeconform accepted a broken manifest:"$'\n'"$out"
	fi
	[[ "$out" == *"$want"* ]] || die "self-check $name: rejected, but not for '$want':"$'\n'"$out"
}
reject misspelt "$K8S_DIR/seqkeeper.yaml" 's/^  replicas: 3$/  replica: 3/' "additional properties 'replica' not allowed"
reject wrong-type "$K8S_DIR/seqkeeper.yaml" 's/periodSeconds: 2$/periodSeconds: "two"/' "got string, want integer"
reject nested "$K8S_DIR/seqkeeper.yaml" 's/readOnlyRootFilesystem: true/readOnlyRootFileSystem: true/' "additional properties 'readOnlyRootFileSystem' not allowed"
reject unknown-kind "$K8S_DIR/seqkeeper.yaml" 's/^kind: Deployment$/kind: Deploymnet/' "could not find schema for Deploymnet"
reject servicemonitor "$K8S_DIR/servicemonitor.yaml" 's/interval: 30s$/intervall: 30s/' "additional properties 'intervall' not allowed"
reject prometheusrule "$K8S_DIR/prometheusrule.yaml" '0,/^          expr:/s//          exp:/' "additional properties 'exp' not allowed"
log "self-check: kubeconform rejects a misspelt field, a wrong type, a misspelt nested field, an unknown kind, and bad ServiceMonitor and PrometheusRule fields"

kubeconform "$K8S_DIR"/*.yaml "$K8S_DIR"/examples/*.yaml

# The chart. helm lint reports a fail of the templates only as [INFO], so
# its own checks (a store, ZooKeeper servers, roots apart) are proven with
# helm template, which stops at them.
CHART=charts/seqkeeper
# chart_rejects NAME VALUES WANT: helm template of the chart
# with the values file VALUES must fail, with a message containing WANT.
chart_rejects() {
	local name="$1" values="$2" want="$3" out
	printf '%s\n' "$values" >"$work/$name-values.yaml"
	if out="$("$helm" template seqkeeper "$CHART" -f "$work/$name-values.yaml" 2>&1)"; then
		die "self-check $name: helm template accepted bad values:"$'\n'"$values"
	fi
	[[ "$out" == *"$want"* ]] || die "self-check $name: rejected, but not for '$want':"$'\n'"$out"
}
required=$'store: file:///tmp/ids\nzookeeper: {servers: ["zk:2181"]}'
chart_rejects misspelt-value $'replica: 3\n'"$required" "additional properties 'replica' not allowed"
chart_rejects nested-value $'image: {tags: v1}\n'"$required" "additional properties 'tags' not allowed"
chart_rejects wrong-type-value $'replicas: three\n'"$required" "got string, want integer"
chart_rejects no-store 'zookeeper: {servers: ["zk:2181"]}' "store is required"
chart_rejects no-zookeeper 'store: file:///tmp/ids' "zookeeper.servers is required"
chart_rejects same-name $'roots: [{name: a, root: /a}, {name: a, root: /b}]\n'"$required" 'have the same name "a"'
chart_rejects same-root $'roots: [{name: a, root: /a}, {name: b, root: /a}]\n'"$required" 'have the same root "/a"'
chart_rejects same-store $'roots: [{name: a, root: /a}, {name: b, root: /b}]\n'"$required" 'have the same store "file:///tmp/ids"'
chart_rejects nested-root $'roots: [{name: a, root: /a}, {name: b, root: /a/b, store: "file:///tmp/b"}]\n'"$required" 'root "/a/b" lies inside root "/a"'
chart_rejects root-env $'roots: [{name: a, root: /a}, {name: b, root: /b, store: "file:///tmp/b"}]\nextraEnv: [{name: SEQKEEPER_ROOT, value: /c}]\n'"$required" 'extraEnv sets SEQKEEPER_ROOT'
chart_rejects memory-limit $'resources: {limits: {memory: 1e9}}\n'"$required" 'cannot derive GOMEMLIMIT from resources.limits.memory'
log "self-check: the chart rejects a misspelt key, a misspelt nested key, a wrong type, no store, no ZooKeeper, roots sharing a name, root or store or nested, SEQKEEPER_ROOT in extraEnv beside several roots, and a memory limit it cannot derive GOMEMLIMIT from"
lint() { # ARGS...: helm lint --strict, its output shown only on failure
	"$helm" lint --strict "$CHART" "$@" >"$work/lint.out" 2>&1 || { cat "$work/lint.out" >&2 && return 1; }
}
lint || die "helm lint --strict $CHART (default values) failed (above)"
for values in "$CHART"/ci/*-values.yaml; do
	lint -f "$values" || die "helm lint --strict $CHART -f $values failed (above)"
	name="$(basename "$values" .yaml)"
	"$helm" template seqkeeper "$CHART" -f "$values" >"$work/chart-$name.yaml" ||
		die "helm template $CHART -f $values failed"
	kubeconform "$work/chart-$name.yaml" || die "the chart rendered with $values is not valid (above)"
done
grep -q '^kind: PrometheusRule$' "$work/chart-full-values.yaml" || die "ci/full-values.yaml rendered no PrometheusRule"
# Several roots: one Deployment for all of them, reading the ConfigMap's
# roots: list.
grep -q '^kind: ConfigMap$' "$work/chart-full-values.yaml" || die "ci/full-values.yaml rendered no ConfigMap: fewer than two roots?"
[[ "$(grep -c '^kind: Deployment$' "$work/chart-full-values.yaml")" -eq 1 ]] || die "ci/full-values.yaml rendered more than one Deployment"
# What seqkeeper makes of the chart's objects: its config package loads
# the ConfigMap's file with the Deployment's environment, roots as given.
(cd internal/tools/chartcheck && go test -count=1 ./... >&2) || die "internal/tools/chartcheck: seqkeeper does not read the chart's objects as rendered (above)"

# The plain manifests are the chart rendered with deploy/kubernetes/values:
# a fresh render must equal what is committed.
bash scripts/render-manifests.sh --out "$work/fresh" 2>/dev/null || die "scripts/render-manifests.sh failed"
rendered=(seqkeeper.yaml servicemonitor.yaml prometheusrule.yaml dashboard.yaml)
# The dashboard is the generator's output (internal/tools/dashboard).
(cd internal/tools/dashboard && go run . "$work/dashboard.json") || die "internal/tools/dashboard failed"
cmp -s "$work/dashboard.json" charts/seqkeeper/dashboards/seqkeeper.json ||
	die "charts/seqkeeper/dashboards/seqkeeper.json is not internal/tools/dashboard's output: run bash scripts/render-manifests.sh and commit the result"
stale() { # DIR: does any rendered file of DIR differ from the fresh one?
	local f
	for f in "${rendered[@]}"; do
		diff -u "$1/$f" "$work/fresh/$f" >&2 || return 0
	done
	return 1
}
mkdir -p "$work/stale"
for f in "${rendered[@]}"; do cp "$work/fresh/$f" "$work/stale/$f"; done
sed -i 's/^  replicas: 3$/  replicas: 4/' "$work/stale/seqkeeper.yaml"
stale "$work/stale" 2>/dev/null || die "self-check: a changed copy of seqkeeper.yaml was not told from a fresh render"
! stale "$K8S_DIR" || die "deploy/kubernetes differs from the chart's render (above): run bash scripts/render-manifests.sh and commit the result"
log "chart: helm lint --strict and kubeconform with the default, minimal and full values; several roots' config file loads; deploy/kubernetes is its fresh render"

# The alerts: one rule file in the PrometheusRule and the docs, naming
# only metrics that exist (the Go sources define every name), valid
# (promtool check rules), and each alert proven by promtool's unit tests
# (deploy/prometheus/alerts_test.yaml): the series that make it fire and
# the healthy ones that keep it silent.
ensure_packages log promtool:prometheus || die "promtool is needed to check and test the alert rules"
sed -n '/^spec:$/,$p' "$K8S_DIR/prometheusrule.yaml" | sed '1d; s/^  //' >"$work/rules.yaml"
[[ -s "$work/rules.yaml" ]] || die "no spec: rule groups in $K8S_DIR/prometheusrule.yaml"
sed -n '/^## Alerts$/,/^## /p' docs/operations.md | sed -n '/^```yaml$/,/^```$/{/^```/d;p}' >"$work/docs-rules.yaml"
diff -u "$work/rules.yaml" "$work/docs-rules.yaml" >&2 ||
	die "the rule file of docs/operations.md ('## Alerts') differs from $K8S_DIR/prometheusrule.yaml's rules (above)"
git ls-files '*.go' 2>/dev/null | grep -v '_test\.go$' | xargs cat >"$work/sources" ||
	find . -name '*.go' ! -name '*_test.go' -exec cat {} + >"$work/sources"
check_names() { # FILE WHAT
	local f="$1" m base missing=()
	for m in $(grep -oE 'seqkeeper_[a-z_]+' "$f" | sort -u); do
		base="$(sed -E 's/_(bucket|count|sum)$//' <<<"$m")"
		grep -q "\"$base\"" "$work/sources" || missing+=("$m")
	done
	((${#missing[@]} == 0)) || die "$2 names metrics seqkeeper does not export: ${missing[*]}"
}
printf 'expr: seqkeeper_no_such_metric > 0\n' >"$work/bad.exprs"
(check_names "$work/bad.exprs" "a made-up rule") 2>/dev/null && die "self-check: a made-up metric name passed the name check"
check_names "$work/rules.yaml" "$K8S_DIR/prometheusrule.yaml"
promtool check rules "$work/rules.yaml" >/dev/null || die "$K8S_DIR/prometheusrule.yaml's rules are not a valid Prometheus rule file (above)"
# alert_tests RULES: promtool test rules of deploy/prometheus/alerts_test.yaml
# against RULES, in a directory of their own.
alert_tests() {
	local dir
	dir="$(mktemp -d "$work/alerts.XXXX")"
	cp deploy/prometheus/alerts_test.yaml "$dir/" && cp "$1" "$dir/rules.yaml"
	(cd "$dir" && promtool test rules alerts_test.yaml)
}
# Each alert's tests can fail: one whose for: never ends must miss its
# firing case, and one that always fires must break the healthy case;
# each for that alert (promtool names it), not for a broken copy.
# mutate M WITH: the rule file with rule $i's "M: ..." line made "M: WITH".
mutate() { awk -v i="$i" -v m="$1" -v with="$2" '/^ *- alert: /{k++} k == i && $1 == m":" {sub(m": .*", m": " with)} {print}' "$work/rules.yaml"; }
mapfile -t alerts < <(sed -n 's/^ *- alert: //p' "$work/rules.yaml")
((${#alerts[@]} > 0)) || die "no alert in $K8S_DIR/prometheusrule.yaml's rules"
for ((i = 1; i <= ${#alerts[@]}; i++)); do
	name="${alerts[i - 1]}"
	mutate for 1000h >"$work/never.yaml"
	mutate expr 'vector(1)' >"$work/always.yaml"
	for m in never always; do
		cmp -s "$work/$m.yaml" "$work/rules.yaml" && die "self-check: the $m copy of $name is the rule file unchanged"
		promtool check rules "$work/$m.yaml" >/dev/null 2>&1 || die "self-check: the $m copy of $name is not a valid rule file"
		if out="$(alert_tests "$work/$m.yaml" 2>&1)"; then
			die "self-check: the alert tests pass with $name made to $m fire"
		fi
		grep -q "alertname: $name," <<<"$out" || die "self-check: with $name made to $m fire the alert tests fail, but not on $name:"$'\n'"$out"
	done
done
alert_tests "$work/rules.yaml" >"$work/alert-tests.out" 2>&1 || { cat "$work/alert-tests.out" >&2; die "the alert tests of deploy/prometheus/alerts_test.yaml fail (above)"; }
log "alerts: ${#alerts[@]} rules, the same in docs/operations.md and $K8S_DIR/prometheusrule.yaml, every metric exported, valid (promtool check rules), each one's firing and silence tested (promtool test rules; a rule that never or always fires fails them)"

# The systemd unit (its binary's path is replaced by one that exists here).
ensure_packages log systemd-analyze:systemd ||
	die "systemd-analyze is needed to check deploy/systemd/seqkeeper.service"
unit="$work/unit/seqkeeper.service"
mkdir -p "$work/unit"
sed 's#^ExecStart=/usr/local/bin/seqkeeper #ExecStart=/bin/true #' deploy/systemd/seqkeeper.service >"$unit"
cmp -s "$unit" deploy/systemd/seqkeeper.service && die "self-check: ExecStart of deploy/systemd/seqkeeper.service not found"
printf '[Service]\nExecStart=/bin/true\n' >"$work/plain.service"
systemd-analyze security --offline=true --threshold=20 "$work/plain.service" >/dev/null 2>&1 &&
	die "self-check: systemd-analyze security passed an unhardened unit"
systemd-analyze verify "$unit"
score="$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1 | tail -n 1)" ||
	die "deploy/systemd/seqkeeper.service is exposed above 2.0: $score"
log "deploy/systemd/seqkeeper.service: systemd-analyze verify passed; ${score#→ }"
