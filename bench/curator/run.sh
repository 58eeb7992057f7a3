#!/usr/bin/env bash
# Runs the Curator baseline of docs/performance.md ("Cold windows"): Apache
# Curator's DistributedAtomicLong.increment() from THREADS threads (each its
# own ZooKeeper session) for SECONDS against the ZooKeeper at ZK_CONNECT,
# and prints one JSON line (ids, ids_per_second, latency_seconds).
#
#   bash bench/curator/run.sh ZK_CONNECT [THREADS] [SECONDS]
#
# It installs Debian's Curator packages when they are missing (apt-get, as
# root), and compiles CuratorBench.java into $SEQKEEPER_CACHE (default
# ~/.cache/seqkeeper)/curator-bench when the source is newer than the build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if (($# < 1)); then
	echo "usage: $0 ZK_CONNECT [THREADS] [SECONDS]" >&2
	exit 2
fi
connect=$1 threads=${2:-8} seconds=${3:-5}

# shellcheck source=build.sh
source "$here/build.sh" CuratorBench
exec java -Xmx256m -cp "$out:$cp" CuratorBench "$connect" "$threads" "$seconds"
