#!/usr/bin/env bash
# Runs every fuzz target for a fixed number of inputs (default 40,000;
# FUZZTIME=400000x or a duration for a longer look). scripts/test.sh runs
# it beside its container suite; the package tests ran the seed corpora
# (testdata/fuzz), this looks a little further.
#
# The targets are found in the sources (a func Fuzz... in a _test.go
# file), so a new one joins by itself without building every package's
# tests again (go test -list would, 40 s here). Each package's test binary
# is built once with the fuzzing instrumentation (go test -c -fuzz) and run
# once per target, in the package's directory (where a failing input is
# written) and on go test -fuzz's own cache of interesting inputs: go test
# -fuzz would link it again for every target.
#
# The budget is a count, not a time: Go 1.26's fuzz coordinator can fail a
# time-limited run with a bare "context deadline exceeded" at the deadline
# when the machine is loaded (golang/go#75804, fixed in Go 1.27). The
# count is the one the step has used since it found the parsers' faults
# listed in CHANGELOG.md, so it still looks as far: 40,000 inputs take
# 2-26 s per target here.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-40000x}
fuzzbin=$(mktemp -d)
trap 'rm -rf "$fuzzbin"' EXIT
fuzzcache="$(go env GOCACHE)/fuzz"
git grep -o '^func Fuzz[A-Za-z0-9_]*(' -- '*_test.go' ':!integration' | sed 's/^\(.*\)\/[^/]*:func \(Fuzz[A-Za-z0-9_]*\)($/.\/\1 \2/' | sort |
	while read -r dir target; do
		pkg=$(go list "$dir")
		bin="$fuzzbin/${pkg//\//_}.test"
		if [[ ! -x "$bin" ]]; then
			go test -c -fuzz . -o "$bin" "$pkg"
		fi
		s=$(date +%s)
		if ! out=$(cd "$(go list -f '{{.Dir}}' "$pkg")" && "$bin" -test.run '^$' -test.fuzz "^$target\$" \
			-test.fuzztime "$fuzztime" -test.fuzzcachedir "$fuzzcache/$pkg" -test.timeout 20m </dev/null 2>&1); then
			echo "$out"
			if grep -q "Failing input written to" <<<"$out"; then
				echo "$target found a failing input, now in $pkg's testdata/fuzz/$target: fix the code and keep the input there as a regression seed"
			else
				echo "$target: the fuzzing failed without a failing input (above)"
			fi
			exit 1
		fi
		echo "$(date +%H:%M:%S) fuzz: $target ($pkg), $fuzztime: $(($(date +%s) - s)) s"
	done
