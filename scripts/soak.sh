#!/usr/bin/env bash
# Runs the soak (integration/soak_test.go, TestSoak) for DURATION (a Go
# duration, default 1h): three replicas under the chaos suite's workers
# and random faults, the store's audit and compaction at their defaults;
# it fails on any ID handed out twice and on a leak in a replica's
# memory, goroutines, open files or ZooKeeper watches, or in the store's
# objects and bytes. The figures are logged at its end. Built without
# -race (an hour of it on two cores is the workers' time, not the
# replicas'); SEQKEEPER_SOAK_SAMPLE sets the sampling interval, and
# SEQKEEPER_SOAK_QUIET the quiet time between faults (2 to 9 times it;
# default 10s).
#
#   bash scripts/soak.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
export TESTCONTAINERS_RYUK_DISABLED=true
bash scripts/setup.sh
cd integration
SEQKEEPER_SOAK_DURATION=${1:-1h} go test -count=1 -run '^TestSoak$' -timeout 0 -v .
