#!/usr/bin/env bash
# Runs the seqkeeper demo stack (docker-compose.yml): a 3-node ZooKeeper
# ensemble, MinIO and three seqkeeper replicas, and shows it handing out IDs.
#
#   bash scripts/demo.sh          build missing images, start, show it working
#   bash scripts/demo.sh --tls    the same with TLS to ZooKeeper and x509
#                                 identities under the least-privilege ACL
#                                 layout (docker-compose.tls.yml)
#   bash scripts/demo.sh down     stop it and delete its data
#
# Needs Go and Docker. On a fresh machine it installs, as root, the Debian
# packages it uses (debootstrap, curl, CA certificates, docker-compose when
# there is no compose at all), then builds the images without a registry:
# the first run takes about 10 minutes (MinIO from source, a Debian root
# file system for ZooKeeper), later runs seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOG_TAG=demo
. scripts/lib.sh

command -v go >/dev/null 2>&1 || die "Go is missing: install Go 1.26 or later (https://go.dev/dl/) and put it on PATH"
command -v docker >/dev/null 2>&1 || die "Docker is missing: install Docker Engine (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "the Docker daemon does not answer: start it (systemctl start docker) or check your access to it"
# Arguments: up (default) or down, and --tls.
action=up tls=false
for arg in "$@"; do
	case "$arg" in
	up | down) action="$arg" ;;
	--tls) tls=true ;;
	*)
		echo "usage: bash scripts/demo.sh [up|down] [--tls]" >&2
		exit 2
		;;
	esac
done
set -- "$action"

extra=()
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
	extra+=(docker-compose:docker-compose)
fi
if [[ "${1:-up}" == up ]]; then
	ensure_packages log debootstrap:debootstrap curl:curl -:ca-certificates "${extra[@]}" || exit 2
fi
if command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
else
	die "neither docker-compose nor the docker compose plugin is installed: apt-get install docker-compose"
fi

if $tls || [[ -f .demo-tls/ca.pem && "$action" == down ]]; then
	compose+=(-f docker-compose.yml -f docker-compose.tls.yml)
fi
case "$action" in
up) ;;
down)
	log "${compose[*]} down -v"
	"${compose[@]}" down -v --remove-orphans
	exit 0
	;;
esac
if $tls; then
	log "writing the demo's throwaway TLS certificates to .demo-tls (go run ./internal/tools/devcerts)"
	go run ./internal/tools/devcerts -dir .demo-tls -hosts zoo1,zoo2,zoo3,localhost,127.0.0.1 \
		-clients seqkeeper-replica,seqkeeper-worker,seqkeeper-admin
fi

# wait_for WHAT TIMEOUT COMMAND... retries COMMAND every second.
wait_for() {
	local what="$1" timeout="$2" start=$SECONDS
	shift 2
	log "waiting for $what (up to ${timeout}s)"
	until "$@" >/dev/null 2>&1; do
		((SECONDS - start < timeout)) || die "$what not ready after ${timeout}s; see: ${compose[*]} logs"
		sleep 1
	done
	log "$what: ready after $((SECONDS - start))s"
}

# zk_mode PORT prints the server's role (leader, follower, standalone).
# With --tls the host reaches only the TLS port: ask the server's plain
# port on its own loopback, from inside its container.
zk_mode() {
	local reply
	if $tls; then
		"${compose[@]}" exec -T "zoo$(($1 - 2180))" bash -c \
			'exec 3<>/dev/tcp/127.0.0.1/2181 && echo srvr >&3 && cat <&3' 2>/dev/null | sed -n 's/^Mode: //p' | grep .
		return
	fi
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	echo srvr >&3
	reply="$(cat <&3)"
	exec 3<&-
	sed -n 's/^Mode: //p' <<<"$reply" | grep .
}

zk_serving() {
	local port
	for port in 2181 2182 2183; do
		zk_mode "$port" || return 1
	done
}

log "building the images that are missing (scripts/images.sh; the first time about 10 minutes, with progress below)"
bash scripts/images.sh

log "${compose[*]} up -d"
"${compose[@]}" up -d

wait_for "ZooKeeper ensemble (zoo1..3 report leader/follower to srvr on 127.0.0.1:2181-2183)" 120 zk_serving
for port in 2181 2182 2183; do
	log "  127.0.0.1:$port: $(zk_mode "$port")"
done
wait_for "MinIO (http://127.0.0.1:9000/minio/health/live)" 60 curl -fsS http://127.0.0.1:9000/minio/health/live

replica_ready() { curl -fsS "http://127.0.0.1:$1/readyz"; }
for port in 7071 7072 7073; do
	wait_for "replica on 127.0.0.1:$port (GET /readyz)" 90 replica_ready "$port"
done

# Runs the operator CLI inside replica 1, which has the cluster's settings
# in its environment.
cli() { "${compose[@]}" exec -T seqkeeper1 /seqkeeper "$@"; }

if $tls; then
	# The replicas created the root with their own identity; the admin
	# (ZooKeeper's x509 super user in this demo) sets the least-privilege
	# layout over it. The worker, refused until then, starts taking.
	echo
	echo "\$ seqkeeper acl apply --admin x509:CN=seqkeeper-admin --replica x509:CN=seqkeeper-replica --worker x509:CN=seqkeeper-worker"
	"${compose[@]}" exec -T -e SEQKEEPER_ZK_TLS_CERT_FILE=/tls/seqkeeper-admin.pem -e SEQKEEPER_ZK_TLS_KEY_FILE=/tls/seqkeeper-admin-key.pem \
		seqkeeper1 /seqkeeper acl apply --admin x509:CN=seqkeeper-admin \
		--replica x509:CN=seqkeeper-replica --worker x509:CN=seqkeeper-worker || log "acl apply failed"
fi

echo
echo "\$ seqkeeper leader"
cli leader || log "seqkeeper leader failed"
for port in 7071 7072 7073; do
	echo "\$ curl http://127.0.0.1:$port/v1/status"
	curl -fsS "http://127.0.0.1:$port/v1/status" || log "status of 127.0.0.1:$port failed"
	echo
done
echo
if ! cli describe demo >/dev/null 2>&1; then
	echo "\$ seqkeeper create demo"
	cli create demo
fi
echo "== five IDs from sequence 'demo' through each replica (the first take waits for the primary to initialise it)"
for port in 7071 7072 7073; do
	echo "\$ curl -X POST 'http://127.0.0.1:$port/v1/sequences/demo/ids?count=5'"
	curl -fsS --max-time 60 -X POST "http://127.0.0.1:$port/v1/sequences/demo/ids?count=5" || log "taking IDs via 127.0.0.1:$port failed"
	echo
done
echo
echo "\$ seqkeeper describe demo"
cli describe demo || true

# Leader failover, live: stop the primary's container and watch another
# replica take over while the worker keeps getting IDs.
leader_id() { "${compose[@]}" exec -T "$1" /seqkeeper leader 2>/dev/null | awk '/^leader:/ {print $2; exit}'; }
primary=$(leader_id seqkeeper1)
if [[ "$primary" =~ ^seqkeeper[123]$ ]]; then
	echo
	echo "== leader failover: the primary is $primary; stopping its container"
	echo "\$ ${compose[*]} logs --tail 3 worker"
	"${compose[@]}" logs --no-color --tail 3 worker || true
	"${compose[@]}" stop -t 10 "$primary"
	other=seqkeeper1
	[[ $primary == seqkeeper1 ]] && other=seqkeeper2
	new_leader() { local l; l=$(leader_id "$other"); [[ -n "$l" && "$l" != "$primary" ]]; }
	wait_for "another replica to lead" 60 new_leader
	echo "new primary: $(leader_id "$other")"
	sleep 3
	echo "\$ ${compose[*]} logs --tail 5 worker      (IDs kept flowing)"
	echo "(the stopped replica pushed its unused buffer back on SIGTERM; takes hand out recycled IDs first, oldest holes first, so the worker's IDs may go down: still never twice)"
	"${compose[@]}" logs --no-color --tail 5 worker || true
	"${compose[@]}" start "$primary"
	echo "$primary restarted; it rejoins as a standby."
else
	log "could not read the leader (got '$primary'); skipping the failover"
fi
zk_line="127.0.0.1:2181-2183   (${compose[*]} exec zoo1 zkCli.sh -server localhost:2181)"
if $tls; then
	zk_line="127.0.0.1:2281-2283, TLS with a client certificate from .demo-tls (the plain port 2181 answers only inside each container, and a session there has no identity: the layout lets it read nothing)"
fi
cat <<EOF

The stack keeps running:
  Replicas' HTTP API   http://127.0.0.1:7071, :7072, :7073 (docs/http-api.md)
  Operator CLI         ${compose[*]} exec seqkeeper1 /seqkeeper list   (docs/cli.md)
  ZooKeeper ensemble   $zk_line
  MinIO console        http://127.0.0.1:9001 (minioadmin / minioadmin)
  Logs                 ${compose[*]} logs -f seqkeeper1    (the worker: ${compose[*]} logs -f worker)

Stop and delete everything:  bash scripts/demo.sh down   (runs: ${compose[*]} down -v)
EOF
