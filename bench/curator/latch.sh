#!/usr/bin/env bash
# Runs one Curator LeaderLatch candidate, the baseline of the crash
# handover in docs/performance.md ("Handover"): it prints "started <ms>",
# then "leader <ms>" when it leads, and runs until killed.
#
#   bash bench/curator/latch.sh ZK_CONNECT PATH SESSION_MS ID
#
# Like run.sh, it installs Debian's Curator packages when they are missing
# and compiles LatchBench.java into $SEQKEEPER_CACHE/curator-bench.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if (($# != 4)); then
	echo "usage: $0 ZK_CONNECT PATH SESSION_MS ID" >&2
	exit 2
fi

# shellcheck source=build.sh
source "$here/build.sh" LatchBench
exec java -Xmx128m -XX:+UseSerialGC -cp "$out:$cp" LatchBench "$@"
