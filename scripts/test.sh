#!/usr/bin/env bash
# Runs every seqkeeper test against real servers: installs what is missing
# (scripts/setup.sh), checks formatting, vet and staticcheck, runs the
# package tests with the race detector, the pace benchmarks, then the
# container suite, which is the Go module of its own in integration/ (it
# keeps testcontainers out of the library's module graph). The manifests'
# checks run beside the package tests, and every fuzz target (a fixed
# number of inputs) beside the container suite, both at idle priority.
# Each step logs its start; the last line is the total. The other steps
# run one after another: each keeps both cores of a small machine busy
# (the container suite runs clusters side by side already,
# integration/slots_test.go), and one beside another at the same priority
# only starves the timings both assert.
#
#   bash scripts/test.sh            everything
#   bash scripts/test.sh -short     the same with shorter soak/chaos runs
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"
export TESTCONTAINERS_RYUK_DISABLED=true

# Each step's line says what the step before it took: seconds, CPU-seconds
# of the whole machine (containers included, from /proc/stat; nothing
# where there is none) and how busy that kept the cores. A step near 100%
# cannot go faster by running beside another.
cpu() { awk '/^cpu /{b=$2+$3+$4+$7+$8; print b, b+$5+$6+$9}' /proc/stat 2>/dev/null || echo "0 0"; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
cores=$(grep -c '^cpu[0-9]' /proc/stat 2>/dev/null) || cores=1 # the cpu line sums them all
start=$(date +%s)
read -r start_busy start_all < <(cpu)
step=$start step_busy=$start_busy step_all=$start_all
took() { # took SINCE BUSY ALL: the figures since then, or nothing
	local now b a
	now=$(date +%s)
	read -r b a < <(cpu)
	((a > $3)) || return 0
	printf '%ds, %d CPU-s, %d%% of %d cores' $((now - $1)) $(((b - $2) / hz)) $((100 * (b - $2) / (a - $3))) "$cores"
}
log() {
	local last
	last=$(took "$step" "$step_busy" "$step_all")
	printf '%s test: %s%s\n' "$(date +%H:%M:%S)" "$*" "${last:+ (the step before: $last)}"
	step=$(date +%s)
	read -r step_busy step_all < <(cpu)
}

bash scripts/setup.sh

# The machine's pace, to compare runs' times with: a fixed amount of one
# core's work, at the start and at the end (a shared machine's pace drifts
# within a run too). A run whose gauge is slower than another's ran on a
# slower machine, whatever its tests did.
gauge() {
	log "machine gauge ($1): BenchmarkParseState, 300,000 parses on one core"
	go test -run '^$' -bench '^BenchmarkParseState$' -benchtime 300000x -cpu 1 ./sequence/state | grep '^Benchmark' ||
		{ echo "the gauge did not run"; exit 1; }
}
gauge start

log "gofmt, go vet, staticcheck"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$unformatted" ]]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi
# The house rule: a file of ours (not a test, not generated, not the
# vendored go-zookeeper) stays under 500 lines; split it by job.
long=$(git ls-files '*.go' | grep -v -e '_test\.go$' -e '^zkclient/internal/zk/' | while read -r f; do
	if ! head -n 5 "$f" | grep -q '^// Code generated .* DO NOT EDIT\.$' && [[ $(wc -l < "$f") -gt 500 ]]; then
		echo "  $f: $(wc -l < "$f") lines"
	fi
done)
if [[ -n "$long" ]]; then
	echo "files over 500 lines (split them by job):"; echo "$long"; exit 1
fi
# And no product function over 80 lines (internal/tools/funclen says
# which): split it into named steps.
go run ./internal/tools/funclen
go vet ./...
staticcheck ./...
(cd integration && go vet ./... && staticcheck ./...)

# The checks below in the background, from here on, at the lowest CPU
# priority (SCHED_IDLE, nice 19): they take only what the steps in the
# foreground leave idle (both keep two cores about 95% busy), and those
# assert their timings as they did alone. Each is waited for at the end.
# setsid gives each its own process group, to stop it by, and its own
# session, which a kernel with sched_autogroup_enabled (Debian's default)
# schedules as a group of its own, weighted as an equal of the whole
# foreground whatever its tasks' priorities: the group's nice, set in
# /proc/self/autogroup, is what keeps it out of the way (two "idle"
# spinners took two thirds of two cores from two foreground ones without
# it, 3% with it).
runtmp=$(mktemp -d)
declare -A bgpid bgbegan
trap 'for p in "${bgpid[@]}"; do kill -- -"$p" 2>/dev/null || true; done; rm -rf "$runtmp"' EXIT
background() { # background NAME COMMAND...: its output goes to $runtmp/NAME.log
	local name=$1
	shift
	setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec chrt --idle 0 nice -n 19 "$@"' "$name" "$@" >"$runtmp/$name.log" 2>&1 &
	bgpid[$name]=$!
	bgbegan[$name]=$(date +%s)
}
awaited() { # awaited NAME WHAT RERUN: waits for NAME, prints its output, fails the run if it failed
	local rc=0
	log "$2, begun $(($(date +%s) - ${bgbegan[$1]})) s ago: waiting for them to end"
	wait "${bgpid[$1]}" || rc=$?
	cat "$runtmp/$1.log"
	if ((rc != 0)); then
		echo "$2 failed (exit $rc, above); run them again alone with: $3"
		exit 1
	fi
}
# The manifests' checks took 25 s of the foreground (43 CPU-s).
log "deploy/: Kubernetes manifests (kubeconform, strict), alert rules, systemd unit, in the background at idle priority"
background manifests bash scripts/validate-manifests.sh

# Fast package tests first, then the container suite, which starts whole
# clusters and takes minutes. Four packages' tests run at once: most of
# their time is spent waiting on their servers (a session to expire, a
# primary to take over), so go test's default of one per core kept two
# cores 63% busy (308 s); four keep them 85% busy (231 s), the same work.
log "package tests (-race)"
go test -race -count=1 -p 4 -timeout 30m "$@" ./...

# The pace guard: the reserve and raise benchmarks in short form, printed
# for whoever reads the log, never judged here (a timed assertion on a
# shared machine is a flake). scripts/pace.sh compares a commit with its
# parent on the same figures, alternated.
log "pace: BenchmarkReserve and BenchmarkPace, short (printed, not judged; compare commits with scripts/pace.sh)"
# One second a row is enough to show a stall (the capped reserve's was a
# 92x fall in IDs/s); pace.sh alternates longer rows for a finer figure.
go test -run '^$' -bench 'Reserve|^BenchmarkPace$' -timeout 10m ./bench/ -bench.dur=1s |
	grep -E '^(Benchmark|ok|FAIL|---|panic)' || { echo "the pace benchmarks did not run"; exit 1; }

# Every fuzz target, for a fixed number of inputs (scripts/fuzz.sh), in
# the background from here on, at the lowest CPU priority (SCHED_IDLE,
# nice 19): it takes only what the container suite leaves idle, which
# then asserts its timings as it did alone. The container suite's wall
# time is set by its tests' durations, and its cores stood about a tenth
# idle; the fuzzing took 2 to 3 minutes of both cores on its own.
log "fuzz targets (${FUZZTIME:-40000x} each), in the background at idle priority, beside the steps below"
background fuzz bash scripts/fuzz.sh

# The rolling upgrade test (TestRollingUpgrade) runs the release in
# integration/images/upgrade-from beside this tree: built once per commit,
# then cached.
log "the release the rolling upgrade starts from (scripts/upgrade-from.sh)"
bash scripts/upgrade-from.sh
log "container suite (-race)"
(cd integration && SEQKEEPER_SLOT_LOG="$runtmp/slots.log" go test -race -count=1 -timeout 45m "$@" ./...)
echo "the container suite's tests, by when they held their cluster slots ($(grep -c . "$runtmp/slots.log" || true) of them; integration/slots_test.go):"
cat "$runtmp/slots.log" 2>/dev/null || true
awaited manifests "the manifests' checks" "bash scripts/validate-manifests.sh"
awaited fuzz "the fuzz targets" "bash scripts/fuzz.sh"
gauge end
log "all tests passed: $(took "$start" "$start_busy" "$start_all")"
