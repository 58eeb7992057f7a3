#!/usr/bin/env bash
# Runs one Curator LeaderLatch candidate, the baseline of the crash
# handover in docs/performance.md (issue 29): it prints "started <ms>",
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

jars=/usr/share/java
if [[ ! -f $jars/curator-recipes.jar ]]; then
	echo "curator latch: installing Debian's Curator packages" >&2
	apt-get install -y -q libcurator-recipes-java libcurator-framework-java libcurator-client-java >&2
fi
cp=$jars/curator-recipes.jar:$jars/curator-framework.jar:$jars/curator-client.jar:$jars/guava.jar
cp=$cp:$jars/zookeeper.jar:$jars/zookeeper-jute.jar:$jars/slf4j-api.jar:$jars/slf4j-nop.jar

out=${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}/curator-bench
if [[ ! -f $out/LatchBench.class || $here/LatchBench.java -nt $out/LatchBench.class ]]; then
	mkdir -p "$out"
	javac -d "$out" -cp "$cp" "$here/LatchBench.java"
fi
exec java -Xmx128m -XX:+UseSerialGC -cp "$out:$cp" LatchBench "$@"
