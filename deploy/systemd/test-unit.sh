#!/usr/bin/env bash
# Runs deploy/systemd/seqkeeper.service under a real systemd (PID 1 of a
# Debian 12 container, systemd 252) beside a ZooKeeper 3.8 in quorum mode,
# installed the way the unit's header says, and checks what an operator
# relies on: it starts under the full sandbox and serves IDs over HTTP
# behind the token; a stop pushes the unused IDs back and exits 0; a
# configuration error (exit 2) is not restarted; a crash is; and the
# sandbox's exposure score. The store is file:// (StateDirectory=), so no
# S3 is needed.
#
#   bash deploy/systemd/test-unit.sh
#
# Needs Docker with the zookeeper:3.8 image (bash scripts/images.sh builds
# it offline), a Debian mirror to add systemd to it (apt-get, once), and a
# daemon that grants CAP_SYS_ADMIN (systemd's mount namespaces for
# ProtectSystem= and friends). Not part of scripts/test.sh: CI's Docker may
# not grant that capability.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. deploy/zookeeper-container.sh

IMAGE=seqkeeper/systemd-test:dev
NET="seqkeeper-unit-$$"
ZK="seqkeeper-unit-zk-$$"
SYS="seqkeeper-unit-sys-$$"
work="$(mktemp -d)"

log() { printf '%s unit: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() {
	log "FAIL: $*"
	docker exec "$SYS" journalctl -u seqkeeper --no-pager -n 30 -o cat >&2 2>/dev/null || true
	exit 1
}
cleanup() {
	docker rm -f "$SYS" "$ZK" >/dev/null 2>&1 || true
	docker network rm "$NET" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
in_sys() { docker exec "$SYS" bash -c "$1"; }
prop() { in_sys "systemctl show seqkeeper -p $1 --value"; }

docker image inspect zookeeper:3.8 >/dev/null 2>&1 || fail "no zookeeper:3.8 image: run bash scripts/images.sh"
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	log "building $IMAGE: zookeeper:3.8 plus systemd (apt-get)"
	printf 'FROM zookeeper:3.8\nRUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd systemd-sysv >/dev/null && rm -rf /var/lib/apt/lists/*\n' >"$work/Dockerfile"
	docker build -q -t "$IMAGE" "$work" >/dev/null
fi
log "building seqkeeper"
CGO_ENABLED=0 go build -o "$work/seqkeeper" ./cmd/seqkeeper

docker network create "$NET" >/dev/null
start_zookeeper "$ZK" "$NET" zk
docker run -d --name "$SYS" --network "$NET" -p 127.0.0.1::7070 \
	--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
	-v /sys/fs/cgroup:/sys/fs/cgroup:ro --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
	--entrypoint /lib/systemd/systemd "$IMAGE" >/dev/null ||
	fail "cannot start a container with systemd as PID 1"
for _ in $(seq 30); do
	state="$(in_sys 'systemctl is-system-running' 2>/dev/null || true)"
	[[ "$state" == running || "$state" == degraded ]] && break
	sleep 1
done
[[ "$state" == running || "$state" == degraded ]] || fail "systemd did not boot ($state)"

# Installed as the unit's header says, plus a file:// store.
docker cp "$work/seqkeeper" "$SYS:/usr/local/bin/seqkeeper"
docker cp deploy/systemd/seqkeeper.service "$SYS:/etc/systemd/system/seqkeeper.service"
in_sys 'set -e
useradd --system --no-create-home --shell /usr/sbin/nologin seqkeeper
mkdir -p /etc/seqkeeper /etc/systemd/system/seqkeeper.service.d
install -m 0640 -g seqkeeper /dev/null /etc/seqkeeper/token
head -c 32 /dev/urandom | base64 >/etc/seqkeeper/token
install -m 0600 /dev/null /etc/seqkeeper/seqkeeper.env
printf "%s\n" SEQKEEPER_ZK=zk:2181 SEQKEEPER_STORE=file:///var/lib/seqkeeper \
	SEQKEEPER_HTTP=0.0.0.0:7070 SEQKEEPER_SHUTDOWN_DELAY=1s SEQKEEPER_ID=vm-1 >/etc/seqkeeper/seqkeeper.env
printf "[Service]\nStateDirectory=seqkeeper\n" >/etc/systemd/system/seqkeeper.service.d/file-store.conf
systemctl daemon-reload'
token="$(in_sys 'cat /etc/seqkeeper/token')"
url="http://$(docker port "$SYS" 7070/tcp | head -n 1)"

log "systemctl start seqkeeper"
in_sys 'systemctl start seqkeeper' || fail "the unit did not start"
for _ in $(seq 60); do
	[[ "$(curl -s -m 2 "$url/readyz" || true)" == *'"ready":true'* ]] && break
	sleep 1
done
[[ "$(curl -s -m 2 "$url/readyz" || true)" == *'"ready":true'* ]] || fail "/readyz never said ready"
[[ "$(prop User)" == seqkeeper ]] || fail "not running as seqkeeper"
in_sys '/usr/local/bin/seqkeeper create orders --zk zk:2181 >/dev/null'
code="$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST "$url/v1/sequences/orders/ids?count=5")"
[[ "$code" == 401 ]] || fail "an ID request without the token got $code, want 401"
ids=""
for _ in $(seq 30); do
	ids="$(curl -s -m 10 -X POST -H "Authorization: Bearer $token" "$url/v1/sequences/orders/ids?count=5" || true)"
	[[ "$ids" == *'"ranges"'* ]] && break
	sleep 1
done
[[ "$ids" == *'"ranges"'* ]] || fail "no IDs over HTTP: $ids"
log "serving under the sandbox as user seqkeeper: $ids"

in_sys 'systemctl stop seqkeeper'
[[ "$(prop Result)" == success && "$(prop ExecMainStatus)" == 0 ]] ||
	fail "stop: Result=$(prop Result) ExecMainStatus=$(prop ExecMainStatus)"
in_sys 'journalctl -u seqkeeper --no-pager -o cat' | grep -q 'pushed back the unused IDs' ||
	fail "the stop did not push the unused IDs back"
log "stop: exit 0, unused IDs pushed back"

in_sys 'echo SEQKEEPER_SHUTDOWN_DELAY=soon >>/etc/seqkeeper/seqkeeper.env; systemctl start seqkeeper || true'
sleep 5
[[ "$(prop ExecMainStatus)" == 2 && "$(prop NRestarts)" == 0 && "$(prop ActiveState)" == failed ]] ||
	fail "a configuration error: ExecMainStatus=$(prop ExecMainStatus) NRestarts=$(prop NRestarts) ActiveState=$(prop ActiveState), want 2, 0, failed"
log "a configuration error: exit 2, not restarted"

in_sys 'sed -i "/=soon/d" /etc/seqkeeper/seqkeeper.env; systemctl reset-failed seqkeeper; systemctl start seqkeeper'
sleep 2
in_sys 'systemctl kill -s KILL seqkeeper'
sleep 5
[[ "$(prop NRestarts)" == 1 && "$(prop ActiveState)" == active ]] ||
	fail "after a crash: NRestarts=$(prop NRestarts) ActiveState=$(prop ActiveState), want 1, active"
log "a crash: restarted"
log "$(in_sys 'systemd-analyze security seqkeeper --no-pager 2>&1 | tail -n 1')"
log "PASS"
