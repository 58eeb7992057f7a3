#!/usr/bin/env bash
# Windows as a user meets them (docs/performance.md, "Cold windows"): against one ZooKeeper (quorum mode, one server) and one MinIO,
# each round runs, in this order,
#
#   for every seqkeeper binary given (interleaved, one 'serve' at a time):
#     seqkeeper serve                                 (fresh root, default settings)
#     seqkeeper create bench --windows 8
#     seqkeeper bench bench --clients 8 --batch 1 --duration 5s    (cold)
#     seqkeeper bench bench --clients 8 --batch 1 --duration 5s    (steady: right after)
#   Curator's DistributedAtomicLong, 8 threads, 5 s   (bench/curator/run.sh)
#   the separate-znode limit, 8 clients, 5 s          (BenchmarkSeparateZnodes)
#
# and prints one line per measurement; the JSON of each is kept in the
# output directory. Compare figures within a round: the machine is shared.
#
#   bash bench/windows-cold.sh [--rounds N] [--old REV] [--out DIR] [--dur D]
#
# --old REV also builds the seqkeeper of commit REV (from a git worktree)
# and runs it before the current tree's in every round. Needs the ZooKeeper
# jar and MinIO of scripts/setup.sh, java 17 and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

rounds=3 old="" out="" dur=5s
while (($#)); do
	case $1 in
	--rounds) rounds=$2; shift ;;
	--old) old=$2; shift ;;
	--out) out=$2; shift ;;
	--dur) dur=$2; shift ;;
	*) echo "usage: $0 [--rounds N] [--old REV] [--out DIR] [--dur D]" >&2; exit 2 ;;
	esac
	shift
done
[[ -n $out ]] || out=$(mktemp -d -t seqkeeper-cold-XXXXXX)
mkdir -p "$out"
work=$(mktemp -d -t seqkeeper-cold-run-XXXXXX)
log() { printf '%s cold: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[[ -z $old ]] || git -C "$repo" worktree remove --force "$work/old-src" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# port prints a free loopback TCP port.
port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		ss -ltn "sport = :$p" | grep -q LISTEN || { echo "$p"; return; }
	done
}

# wait_for SECONDS COMMAND...: retry COMMAND until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || { log "timed out waiting for: $*"; return 1; }
		sleep 0.2
	done
}

log "building the current tree"
go build -o "$work/seqkeeper-new" ./cmd/seqkeeper
go test -c -o "$work/bench.test" ./bench
bins=(new)
if [[ -n $old ]]; then
	log "building $old from a worktree"
	git worktree add --detach "$work/old-src" "$old" >/dev/null
	(cd "$work/old-src" && go build -o "$work/seqkeeper-old" ./cmd/seqkeeper)
	bins=(old new)
fi

zkport=$(port) peer=$(port) elect=$(port)
mkdir -p "$work/zk/data"
echo 1 >"$work/zk/data/myid"
cat >"$work/zk/zoo.cfg" <<EOF
tickTime=500
initLimit=50
syncLimit=25
dataDir=$work/zk/data
clientPort=$zkport
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
standaloneEnabled=false
reconfigEnabled=false
server.1=127.0.0.1:$peer:$elect
EOF
jars=/usr/share/java
java -Xmx256m -XX:+UseSerialGC -Dzookeeper.admin.enableServer=false -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
	-cp "$jars/zookeeper.jar:$jars/zookeeper-jute.jar:$jars/slf4j-api.jar:$jars/slf4j-simple.jar" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk/zoo.cfg" >"$work/zk/server.log" 2>&1 &
pids+=($!)
zk=127.0.0.1:$zkport
# zk_serving: the server answers "srvr" with its mode (leader) once it serves.
zk_serving() {
	exec 3<>"/dev/tcp/127.0.0.1/$zkport" || return 1
	printf srvr >&3
	timeout 2 cat <&3 | grep -q '^Mode: leader'
}
wait_for 60 zk_serving

minio=${SEQKEEPER_MINIO_BIN:-${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}/bin/minio}
mport=$(port) mconsole=$(port)
MINIO_ROOT_USER=minioadmin MINIO_ROOT_PASSWORD=minioadmin MINIO_BROWSER=off MINIO_UPDATE=off \
	"$minio" server --quiet --address "127.0.0.1:$mport" --console-address "127.0.0.1:$mconsole" "$work/minio" >"$work/minio.log" 2>&1 &
pids+=($!)
wait_for 60 curl -fs "http://127.0.0.1:$mport/minio/health/ready"
export AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin
log "zookeeper $zk (quorum mode, one server), minio 127.0.0.1:$mport, load $(cut -d' ' -f1-3 /proc/loadavg); output in $out"

# summary NAME FILE: one line of a 'seqkeeper bench -o json' result.
summary() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
lat = r["latency_seconds"]
takes = max(r.get("takes", r["ids"]), 1)
print(f'{name:<22} {r["ids_per_second"]:>9.0f} IDs/s  conflicts/take {r.get("cas_conflicts", 0)/takes:.3f}  '
      f'round trips/ID {r.get("round_trips_per_id", 0):.2f}  p99 {lat["p99"]*1e3:.1f} ms  p99.9 {lat["p999"]*1e3:.1f} ms  '
      f'max {lat["max"]*1e3:.0f} ms  duplicates {r.get("duplicates", 0)}')
EOF
}

for round in $(seq 1 "$rounds"); do
	for b in "${bins[@]}"; do
		bin=$work/seqkeeper-$b
		root=/cold-$round-$b
		hport=$(port)
		# Each root its own election and marker (serve refuses a root
		# whose election path another root's replicas use).
		export SEQKEEPER_ZK=$zk SEQKEEPER_ROOT=$root SEQKEEPER_LOG_LEVEL=warn
		export SEQKEEPER_ELECTION_PATH=$root-election SEQKEEPER_MARKER_PATH=$root-cluster
		export SEQKEEPER_STORE="s3://cold/$round-$b?endpoint=http://127.0.0.1:$mport&region=us-east-1"
		for _ in 1 2 3; do # another program may take the port first
			"$bin" serve --http "127.0.0.1:$hport" >"$out/serve-$round-$b.log" 2>&1 &
			serve=$!
			pids+=($serve)
			wait_for 60 bash -c "! kill -0 $serve || curl -fs http://127.0.0.1:$hport/v1/status | grep -q '\"leading\":true'"
			kill -0 "$serve" 2>/dev/null && break
			log "serve exited ($(tail -1 "$out/serve-$round-$b.log")); again on another port"
			hport=$(port)
		done
		# The primary has finished starting (store loaded and sealed) once it
		# initialises a first sequence; only then is "bench" created.
		"$bin" create started >/dev/null
		wait_for 60 bash -c "'$bin' describe started -o json | grep -q '\"kind\":\"sequence\"'"
		"$bin" create bench --windows 8 >/dev/null
		# The run starts once the primary has initialised the sequence (its
		# first store write), for both binaries alike.
		wait_for 30 bash -c "'$bin' describe bench -o json | grep -q '\"kind\":\"sequence\"'"
		"$bin" bench bench --clients 8 --batch 1 --duration "$dur" -o json >"$out/$b-cold-$round.json"
		summary "round $round $b cold" "$out/$b-cold-$round.json"
		"$bin" bench bench --clients 8 --batch 1 --duration "$dur" -o json >"$out/$b-steady-$round.json"
		summary "round $round $b steady" "$out/$b-steady-$round.json"
		kill "$serve"
		wait "$serve" 2>/dev/null || true
	done
	bash bench/curator/run.sh "$zk" 8 "${dur%s}" >"$out/curator-$round.json"
	summary "round $round curator" "$out/curator-$round.json"
	SEQKEEPER_TEST_ZK=$zk "$work/bench.test" -test.run '^$' -test.bench 'SeparateZnodes' -bench.dur="$dur" |
		tee "$out/separate-$round.txt" | awk -v r="$round" '/^BenchmarkSeparateZnodes/ {
			split($1, parts, "/")
			for (i = 2; i < NF; i++) m[$(i + 1)] = $i
			printf "round %s separate %-8s %9.0f IDs/s  p99 %.1f ms  p99.9 %.1f ms\n", r, parts[2], m["takes/s"], m["p99-ms"], m["p99.9-ms"] }'
done
