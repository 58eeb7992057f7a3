#!/usr/bin/env bash
# Runs the CI command (.ci/run) from fresh clones of this checkout's HEAD,
# N times in a row (default 5), one at a time, and stops at the first
# failure: the check that the test command passes every time, not just
# once. Each run's log is $DIR/run-<i>.log; the start, load average, exit
# status and seconds of each are printed.
#
#   bash scripts/fresh-runs.sh [N]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-5}
dir=$(mktemp -d)
rev=$(git -C "$repo" rev-parse --short HEAD)
for i in $(seq "$n"); do
	cd "$dir" && rm -rf clone && git clone -q "$repo" clone && cd clone
	git checkout -q "$rev"
	echo "$(date +%H:%M:%S) run $i of $n on $rev: start, load $(cut -d' ' -f1-3 /proc/loadavg)"
	s=$(date +%s)
	rc=0
	CI=true bash .ci/run >"$dir/run-$i.log" 2>&1 || rc=$?
	echo "$(date +%H:%M:%S) run $i of $n on $rev: exit $rc in $(($(date +%s) - s)) s (log: $dir/run-$i.log)"
	if [[ $rc -ne 0 ]]; then
		tail -n 30 "$dir/run-$i.log"
		exit 1
	fi
done
echo "$n runs in a row passed on $rev"
