#!/usr/bin/env bash
# Validates what deploy/ ships:
#
# - the Kubernetes manifests in deploy/kubernetes (and examples/), with kubeconform in
#   strict mode (unknown fields are errors, a kind without a schema is an
#   error), against schemas made offline: kubeconform's default schema
#   registry is on GitHub, which CI cannot reach, so the schemas are
#   generated from the Kubernetes OpenAPI spec and the Prometheus Operator's
#   ServiceMonitor and PrometheusRule CRDs, all from the Go module proxy
#   (internal/tools/k8sschema), and cached under $SEQKEEPER_CACHE;
# - the alert rules: the expressions of deploy/kubernetes/prometheusrule.yaml
#   are those of docs/operations.md, and every metric they name is one
#   seqkeeper exports;
# - the systemd unit in deploy/systemd, with systemd-analyze verify and its
#   offline security score (installed with apt-get when missing).
#
#   bash scripts/validate-manifests.sh
#
# Each validator first proves it can fail: broken copies (a misspelt field,
# a wrong type, an unknown kind, a bad ServiceMonitor and PrometheusRule
# field, an unhardened unit) must be rejected, for the expected reason.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECONFORM=github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
K8S=k8s.io/kubernetes@v1.31.4 # 17 MB download, api/openapi-spec/swagger.json
PROMOP=github.com/prometheus-operator/prometheus-operator@v0.79.2 # 4 MB, the CRDs
CACHE="${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}"
SCHEMAS="$CACHE/k8s-schemas/${K8S##*@}-promop-${PROMOP##*@}"
K8S_DIR=deploy/kubernetes

log() { printf '%s manifests: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
. scripts/lib.sh

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bin="$(go env GOPATH)/bin/kubeconform"
if [[ ! -x "$bin" ]]; then
	log "installing kubeconform ($KUBECONFORM)"
	go install "$KUBECONFORM"
fi

schemas_ready() {
	local k
	for k in deployment-apps-v1 statefulset-apps-v1 service-v1 secret-v1 serviceaccount-v1 \
		poddisruptionbudget-policy-v1 servicemonitor-monitoring-v1 prometheusrule-monitoring-v1; do
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

# The alerts: one set of expressions in the PrometheusRule and the docs,
# naming only metrics that exist (the Go sources define every name).
exprs() { sed -n 's/^[[:space:]]*expr: //p' "$1" | sort; }
exprs "$K8S_DIR/prometheusrule.yaml" >"$work/rule.exprs"
exprs docs/operations.md >"$work/docs.exprs"
[[ -s "$work/rule.exprs" ]] || die "no expr: lines in $K8S_DIR/prometheusrule.yaml"
diff -u "$work/rule.exprs" "$work/docs.exprs" >&2 ||
	die "the alert expressions of docs/operations.md and $K8S_DIR/prometheusrule.yaml differ (above)"
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
check_names "$work/rule.exprs" "$K8S_DIR/prometheusrule.yaml"
check_names docs/operations.md docs/operations.md
# The rule file of docs/operations.md, checked as promtool check rules does
# (internal/tools/promrules, Prometheus's rulefmt): PromQL, durations,
# templates, no unknown field.
promrules() { (cd internal/tools/promrules && go run . "$@"); }
sed -n '/^## Alerts$/,/^## /p' docs/operations.md | sed -n '/^```yaml$/,/^```$/{/^```/d;p}' >"$work/rules.yml"
[[ -s "$work/rules.yml" ]] || die "no \`\`\`yaml rule file under '## Alerts' in docs/operations.md"
sed '0,/^\(\s*\)expr: \(.*\)$/s//\1expr: \2 +/' "$work/rules.yml" >"$work/bad-expr.yml"
sed '0,/^\(\s*\)for: /s//\1fro: /' "$work/rules.yml" >"$work/bad-field.yml"
for f in bad-expr bad-field; do
	cmp -s "$work/$f.yml" "$work/rules.yml" && die "self-check: $f.yml is the rule file unchanged"
	promrules "$work/$f.yml" >/dev/null 2>&1 && die "self-check: promrules accepted $f.yml"
done
promrules "$work/rules.yml" >/dev/null || die "the rules of docs/operations.md are not a valid Prometheus rule file (above)"
log "alerts: $(wc -l <"$work/rule.exprs") rules, the same in docs/operations.md and $K8S_DIR/prometheusrule.yaml, valid PromQL (rulefmt), every metric exported"

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
