#!/usr/bin/env bash
# Runs one model test again and again with fresh seeds, one at a time, and
# stops at the first failure: the sweep that finds what one seed misses.
# Each run's seed, exit status and seconds go to the summary; the log of a
# failing run is kept beside it (and replays with its SEQKEEPER_MODEL_SEED).
#
#   bash scripts/model-seeds.sh [N] [TEST]     default 200 TestModelSeveralRoots
#
# Logs and the summary are in $DIR (printed first). Stop early with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
test=${2:-TestModelSeveralRoots}
dir=$(mktemp -d)
echo "seeds of $test: $dir/summary"
go test -c -o "$dir/model.test" ./internal/model
cd internal/model
for i in $(seq "$n"); do
	seed=$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')
	s=$(date +%s)
	rc=0
	SEQKEEPER_MODEL_SEED=$seed "$dir/model.test" -test.run "^$test\$" -test.count=1 -test.v -test.timeout 10m >"$dir/seed-$seed.log" 2>&1 || rc=$?
	echo "$i seed=$seed rc=$rc $(($(date +%s) - s))s" | tee -a "$dir/summary"
	if [[ $rc -ne 0 ]]; then
		echo "seed $seed failed: $dir/seed-$seed.log (replay: SEQKEEPER_MODEL_SEED=$seed go test -count=1 -run '^$test\$' -v ./internal/model)"
		exit 1
	fi
	rm -f "$dir/seed-$seed.log"
done
echo "$n seeds of $test passed"
