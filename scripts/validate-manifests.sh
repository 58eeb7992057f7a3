#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/kubernetes with kubeconform
# in strict mode (unknown fields are errors), against schemas made offline:
# kubeconform's default schema registry is on GitHub, which CI cannot reach,
# so the schemas are generated from the Kubernetes OpenAPI spec and the
# Prometheus Operator's ServiceMonitor CRD, both from the Go module proxy
# (internal/tools/k8sschema), and cached.
#
#   bash scripts/validate-manifests.sh   (also checks deploy/systemd with systemd-analyze)
#
# It first proves the validator can fail: manifests with a misspelt field
# and a wrong type must be rejected.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECONFORM=github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
K8S=k8s.io/kubernetes@v1.31.4
PROMOP=github.com/prometheus-operator/prometheus-operator@v0.79.2
CACHE="${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}"
SCHEMAS="$CACHE/k8s-schemas/${K8S##*@}-promop-${PROMOP##*@}"

log() { printf '%s manifests: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

bin="$(go env GOPATH)/bin/kubeconform"
if [[ ! -x "$bin" ]]; then
	log "installing kubeconform ($KUBECONFORM)"
	go install "$KUBECONFORM"
fi

if [[ ! -s "$SCHEMAS/deployment-apps-v1.json" || ! -s "$SCHEMAS/servicemonitor-monitoring-v1.json" ]]; then
	log "making the schemas from $K8S and $PROMOP (Go module proxy)"
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	k8s="$(cd "$tmp" && go mod download -json "$K8S" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	promop="$(cd "$tmp" && go mod download -json "$PROMOP" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -d "$k8s" && -d "$promop" ]] || die "could not download $K8S and $PROMOP"
	rm -rf "$SCHEMAS.new"
	go run ./internal/tools/k8sschema -out "$SCHEMAS.new" \
		-swagger "$k8s/api/openapi-spec/swagger.json" \
		-crd "$promop/jsonnet/prometheus-operator/servicemonitors-crd.json" >&2
	rm -rf "$SCHEMAS"
	mv "$SCHEMAS.new" "$SCHEMAS"
fi

kubeconform() {
	"$bin" -strict -summary -schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}

# The validator must reject what is wrong, or passing proves nothing.
broken="$(mktemp -d)"
trap 'rm -rf "$broken" ${tmp:-}' EXIT
sed 's/^  replicas: 3$/  replica: 3/' deploy/kubernetes/seqkeeper.yaml >"$broken/misspelt.yaml"
sed 's/periodSeconds: 2$/periodSeconds: "two"/' deploy/kubernetes/seqkeeper.yaml >"$broken/type.yaml"
sed 's/interval: 30s$/intervall: 30s/' deploy/kubernetes/servicemonitor.yaml >"$broken/crd.yaml"
for f in "$broken"/*.yaml; do
	cmp -s "$f" deploy/kubernetes/seqkeeper.yaml && die "self-check: $(basename "$f") did not change anything"
	if kubeconform "$f" >/dev/null 2>&1; then
		die "self-check: kubeconform accepted a broken manifest ($(basename "$f"))"
	fi
done
log "self-check: kubeconform rejects a misspelt field, a wrong type and a bad ServiceMonitor field"

kubeconform deploy/kubernetes/*.yaml

# The systemd unit, where systemd-analyze is installed (it checks the
# directives; the binary's path is replaced by one that exists here).
if command -v systemd-analyze >/dev/null 2>&1; then
	unit="$broken/seqkeeper.service"
	sed 's#^ExecStart=/usr/local/bin/seqkeeper #ExecStart=/bin/true #' deploy/systemd/seqkeeper.service >"$unit"
	systemd-analyze verify "$unit"
	log "deploy/systemd/seqkeeper.service: systemd-analyze verify passed"
else
	log "systemd-analyze is not installed: deploy/systemd/seqkeeper.service not checked (apt-get install systemd)"
fi
