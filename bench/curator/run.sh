#!/usr/bin/env bash
# Runs the Curator baseline of docs/performance.md (issue 18): Apache
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

jars=/usr/share/java
if [[ ! -f $jars/curator-recipes.jar ]]; then
	echo "curator bench: installing Debian's Curator packages" >&2
	apt-get install -y -q libcurator-recipes-java libcurator-framework-java libcurator-client-java >&2
fi
cp=$jars/curator-recipes.jar:$jars/curator-framework.jar:$jars/curator-client.jar:$jars/guava.jar
cp=$cp:$jars/zookeeper.jar:$jars/zookeeper-jute.jar:$jars/slf4j-api.jar:$jars/slf4j-nop.jar

out=${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}/curator-bench
if [[ ! -f $out/CuratorBench.class || $here/CuratorBench.java -nt $out/CuratorBench.class ]]; then
	mkdir -p "$out"
	javac -d "$out" -cp "$cp" "$here/CuratorBench.java"
fi
exec java -Xmx256m -cp "$out:$cp" CuratorBench "$connect" "$threads" "$seconds"
