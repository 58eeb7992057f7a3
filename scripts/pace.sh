#!/usr/bin/env bash
# Compares a commit with its parent on the figures that keep the primary
# out of the workers' way and on what a user meets (the ID route, raises,
# restore), alternated (parent, commit, parent, commit, ...) on the same
# ZooKeeper and MinIO, and prints each figure of each side and the
# commit's ratio to its parent. It prints and compares; it fails when a
# binary-driven benchmark cannot run, and drops an in-process row that
# one side cannot run (said so).
#
#   capped   BenchmarkReserve: IDs/s with min_reserve = max_reserve = 100
#            over IDs/s at the defaults (vs-defaults), through a real
#            'seqkeeper serve', and each row's slowest request (max-ms)
#   pace     BenchmarkPace: raises/s over the raise floor (raises/raise-floor)
#   handover BenchmarkCrashHandover: a killed and a frozen primary's
#            handover over Curator's LeaderLatch (seqkeeper/curator,
#            frozen-seqkeeper/curator), handover after handover
#   http     BenchmarkHTTP: IDs/s and p99 of the sidecar's ID route,
#            count=1 and count=100, 8 callers (in-process)
#   raises   BenchmarkRaises: raises/s of a primary keeping up with
#            clients that drain their sequences (in-process)
#   restore  BenchmarkRestore: seconds to restore 10,000 sequences (and 1,000) after a
#            wipe, and the heap per sequence (in-process)
#
# Cold windows as a user meets them run from bench/windows-cold.sh --old
# REV (serve, create, two 'seqkeeper bench' runs, each side in turn).
#
#   bash scripts/pace.sh                 HEAD against HEAD^, 2 rounds of each
#   bash scripts/pace.sh REV             REV against REV^
#   bash scripts/pace.sh --base B REV    REV against B
#   bash scripts/pace.sh --rounds N      N rounds (default 2)
#   bash scripts/pace.sh --only capped,pace
#   bash scripts/pace.sh --only http,raises,restore --base bcbacd1 HEAD
#   bash scripts/pace.sh --short         one short round of capped and pace (what CI prints)
#
# The binary-driven rows (capped, handover) run this checkout's benchmark
# against each side's binary (SEQKEEPER_TEST_BIN); pace, http, raises and
# restore run in-process, so each side runs its own benchmark, from a
# worktree of that side. A side
# without the benchmark is said so, not guessed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"

rev=HEAD base="" rounds=2 only=",capped,pace,handover," dur=10s short=false
while (($#)); do
	case $1 in
	--base) base=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--only) only=",$2,"; shift ;;
	--short) short=true rounds=1 dur=1s only=",capped,pace," ;;
	-h|--help) sed -n '2,35p' "$0"; exit 0 ;;
	-*) echo "usage: $0 [--base REV] [--rounds N] [--only capped,pace,handover,http,raises,restore] [--short] [REV]" >&2; exit 2 ;;
	*) rev=$1 ;;
	esac
	shift
done
[[ -n $base ]] || base="$rev^"
log() { printf '%s pace: %s\n' "$(date +%H:%M:%S)" "$*"; }

work=$(mktemp -d -t seqkeeper-pace-XXXXXX) # the two sides' worktrees and binaries
out=$(mktemp -d -t seqkeeper-pace-out-XXXXXX) # every run's output, kept
cleanup() {
	git worktree remove --force "$work/new" >/dev/null 2>&1 || true
	git worktree remove --force "$work/old" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
declare -A sha
for side in old new; do
	r=$base
	[[ $side == new ]] && r=$rev
	sha[$side]=$(git rev-parse --short "$r^{commit}") || { echo "$r: not a commit" >&2; exit 2; }
	git worktree add --detach -q "$work/$side" "${sha[$side]}"
	(cd "$work/$side" && go build -o "$work/$side.bin" ./cmd/seqkeeper)
done
log "new ${sha[new]} against old ${sha[old]}, $rounds round(s) of: ${only//,/ }; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# metric FILE BENCH-PREFIX UNIT: the value before UNIT on the lines of
# BENCH-PREFIX in a 'go test -bench' output, one per line.
metric() { awk -v b="$2" -v u="$3" 'index($1, b) == 1 { for (i = 3; i <= NF; i++) if ($i == u) print $(i-1) }' "$1"; }

# run SIDE NAME DIR BENCH FLAGS...: one 'go test -bench BENCH ./bench/
# FLAGS...' run in DIR, kept in $out.
run() {
	local side=$1 name=$2 dir=$3 bench=$4
	shift 4
	local file="$out/$name.$side.$round.txt"
	if ! (cd "$dir" && SEQKEEPER_TEST_BIN="$work/$side.bin" go test -run '^$' -timeout 30m -bench "$bench" ./bench/ "$@" >"$file" 2>&1); then
		log "$name (${sha[$side]}) failed:"
		tail -n 30 "$file"
		return 1
	fi
}

for ((round = 1; round <= rounds; round++)); do
	order="old new"
	((round % 2 == 0)) && order="new old"
	for side in $order; do
		if [[ $only == *,capped,* ]]; then
			log "round $round, ${sha[$side]}: capped"
			run "$side" capped . 'Reserve/(defaults|min=max=100)$' -bench.dur="$dur"
		fi
		# The in-process rows run each side's own benchmark, in its worktree.
		for row in pace:BenchmarkPace http:BenchmarkHTTP raises:BenchmarkRaises restore:BenchmarkRestore; do
			name=${row%%:*} bench=${row#*:}
			[[ $only == *,$name,* ]] || continue
			if grep -q "^func $bench(" "$work/$side"/bench/*_test.go 2>/dev/null; then
				log "round $round, ${sha[$side]}: $name"
				# BenchmarkRestore restores once per b.N: once is the figure.
				run "$side" "$name" "$work/$side" "^$bench\$" -bench.dur="$dur" -benchtime 1x ||
					{ log "$name not compared: ${sha[$side]} cannot run $bench"; only=${only/,$name,/,}; }
			else
				log "${sha[$side]} has no $bench: $name not compared"
				only=${only/,$name,/,}
			fi
		done
		if [[ $only == *,handover,* ]]; then
			log "round $round, ${sha[$side]}: handover"
			run "$side" handover . 'CrashHandover' -bench.handovers=2
		fi
	done
done

# figure NAME BENCH UNIT: each side's values, and the median new/old.
figure() {
	local name=$1 bench=$2 unit=$3 side vals
	[[ $only == *",$name,"* ]] || return 0
	declare -A v
	for side in old new; do
		v[$side]=$(cat "$out/$name.$side."*.txt | metric /dev/stdin "$bench" "$unit" | sort -g | xargs)
	done
	ratio=$(awk -v a="${v[new]}" -v b="${v[old]}" 'function med(s, n, x) { n = split(s, x, " "); return n % 2 ? x[(n+1)/2] : (x[n/2] + x[n/2+1]) / 2 }
		BEGIN { o = med(b); printf "%.3g", o ? med(a) / o : 0 }')
	printf '%-8s %-42s %-24s %-24s %s\n' "$name" "$unit" "${v[old]}" "${v[new]}" "$ratio"
}
echo
printf '%-8s %-42s %-24s %-24s %s\n' figure "unit (each run)" "old ${sha[old]}" "new ${sha[new]}" "new/old (medians)"
figure capped 'BenchmarkReserve/min=max=100' vs-defaults
figure capped 'BenchmarkReserve/min=max=100' IDs/s
figure capped 'BenchmarkReserve/min=max=100' max-ms
figure capped 'BenchmarkReserve/defaults' IDs/s
figure pace 'BenchmarkPace' raises/raise-floor
figure pace 'BenchmarkPace' store-puts/raise
figure handover 'BenchmarkCrashHandover' seqkeeper/curator
figure handover 'BenchmarkCrashHandover' frozen-seqkeeper/curator
figure http 'BenchmarkHTTP/count=1/' IDs/s
figure http 'BenchmarkHTTP/count=1/' p99-µs
figure http 'BenchmarkHTTP/count=100/' IDs/s
figure http 'BenchmarkHTTP/count=100/' p99-µs
figure raises 'BenchmarkRaises' raises/s
figure restore 'BenchmarkRestore/sequences=10000' restore-s
figure restore 'BenchmarkRestore/sequences=10000' B/sequence
log "done; raw output in $out"
