#!/usr/bin/env bash
# Reruns every performance figure in docs/performance.md against real
# servers (the ZooKeeper jar and MinIO that scripts/setup.sh provides) and
# prints the results; the raw 'go test -bench' output of each row is kept in
# the output directory for benchstat.
#
#   bash scripts/bench.sh                  everything (about 15 minutes on 2 cores)
#   bash scripts/bench.sh --quick          one short pass of each row (about 2 minutes)
#   bash scripts/bench.sh --out DIR        keep the raw output in DIR (default: a new temp dir)
#   bash scripts/bench.sh --no-setup       skip scripts/setup.sh
#   bash scripts/bench.sh --only a,b       only these rows: allocator latency roundtrips
#                                          contention http restore raises handover
#
# Compare two runs with benchstat (go install golang.org/x/perf/cmd/benchstat@latest):
#   benchstat OLD/allocator.txt NEW/allocator.txt
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"

quick=false setup=true out="" only=""
while (($#)); do
	case $1 in
	--quick) quick=true ;;
	--no-setup) setup=false ;;
	--out) out=$2; shift ;;
	--only) only=",$2,"; shift ;;
	*) echo "usage: $0 [--quick] [--no-setup] [--out DIR] [--only ROW,...]" >&2; exit 2 ;;
	esac
	shift
done
[[ -n $out ]] || out=$(mktemp -d -t seqkeeper-bench-XXXXXX)
mkdir -p "$out"

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*"; }

if $quick; then
	count=1 dur=1s latency=5000000x large="" handover="HandoverResign" handovers=20x
else
	count=5 dur=5s latency=20000000x large="-bench.large" handover="Handover" handovers=20x
fi

$setup && bash scripts/setup.sh

log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "go: $(go version); raw output in $out"

# row NAME PACKAGE BENCH-REGEXP FLAGS...: one 'go test -bench' run, shown
# and kept as $out/NAME.txt.
row() {
	local name=$1 pkg=$2 re=$3
	shift 3
	[[ -z $only || $only == *",$name,"* ]] || return 0
	log "$name: go test -run '^\$' -bench '$re' $pkg $*"
	go test -run '^$' -bench "$re" -timeout 60m "$pkg" "$@" | tee "$out/$name.txt" |
		grep -E '^(Benchmark|ok|FAIL|---)' || true
	if grep -q '^FAIL' "$out/$name.txt"; then
		log "$name FAILED; see $out/$name.txt"
		exit 1
	fi
}

row allocator ./bench/ 'AllocatorNext' -count "$count"
row latency ./bench/ 'NextLatency' -benchtime "$latency" -count "$((count > 1 ? 3 : 1))"
row roundtrips ./bench/ 'ZKRoundTrips' -benchtime 1x
row contention ./bench/ 'Contention' -bench.dur="$dur"
row http ./bench/ 'HTTP' -bench.dur="$dur"
row restore ./bench/ 'Restore' -benchtime 1x $large
row raises ./bench/ 'Raises' -bench.dur="$dur"
row handover ./election/ "$handover" -benchtime "$handovers"

if command -v benchstat >/dev/null 2>&1 && [[ -f $out/allocator.txt ]]; then
	log "benchstat summary of the in-process row"
	benchstat "$out/allocator.txt" || true
fi
log "done; raw output in $out"
