#!/usr/bin/env bash
# Proves the README's two commands on a fresh machine: builds a minimal
# Debian chroot that holds only Go (this host's /usr/local/go) and the Docker
# CLI (talking to this host's engine through its socket), clones this
# repository into it from its last commit, and runs there, as root,
#
#   bash scripts/fresh-machine.sh demo     bash scripts/demo.sh  (then demo.sh down)
#   bash scripts/fresh-machine.sh test     bash scripts/test.sh
#
# with empty Go caches and an empty seqkeeper cache, so everything the
# command needs is downloaded and built as on a new machine. Docker images
# live in the host's engine: unless --keep-images is given, the images the
# scripts build (seqkeeper:dev, minio/minio:latest, zookeeper:3.8 and their
# stand-in tags) are removed first so that they are built from scratch; the
# run builds them again. The phases and their times go to standard error.
#
# Needs root, debootstrap, git and a Docker engine. The chroot lives in
# ${SEQKEEPER_FRESH_DIR:-/tmp/seqkeeper-fresh} and is deleted at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${SEQKEEPER_FRESH_DIR:-/tmp/seqkeeper-fresh}"
cmd="${1:-demo}" keep=0
[[ "${2:-}" == --keep-images ]] && keep=1

log() { printf '%s fresh: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
case "$cmd" in
demo) run='bash scripts/demo.sh; status=$?; bash scripts/demo.sh down || true; exit $status' ;;
test) run='bash scripts/test.sh' ;;
*) die "usage: bash scripts/fresh-machine.sh demo|test [--keep-images]" ;;
esac
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
[[ -x /usr/local/go/bin/go ]] || die "no Go in /usr/local/go to copy"
docker_cli="$(command -v docker)" || die "no docker CLI"

umount_all() {
	awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
}
cleanup() {
	umount_all
	rm -rf "$DIR"
}
trap cleanup EXIT
cleanup

phase() {
	local what="$1" start=$SECONDS
	shift
	log "$what"
	"$@"
	log "$what: done in $((SECONDS - start))s"
}

mirror="$(bash "$ROOT/scripts/images.sh" --mirror)"
phase "debootstrap a minimal bookworm (the fresh machine) from $mirror" \
	debootstrap --variant=minbase bookworm "$DIR" "$mirror" >/dev/null
phase "add Go and the Docker CLI" bash -c "
	cp -a /usr/local/go '$DIR/usr/local/go'
	install -m 0755 '$docker_cli' '$DIR/usr/local/bin/docker'
	cp /etc/resolv.conf '$DIR/etc/resolv.conf'
	# The network's own CAs (a TLS-inspecting egress proxy, a company CA)
	# belong to the network, not to the machine: carried over, they join
	# the bundle when the scripts install ca-certificates.
	mkdir -p '$DIR/usr/local/share/ca-certificates'
	cp /usr/local/share/ca-certificates/*.crt '$DIR/usr/local/share/ca-certificates/' 2>/dev/null || true
	mkdir -p '$DIR/src'
	git clone -q '$ROOT' '$DIR/src/seqkeeper'
	git -C '$DIR/src/seqkeeper' log --oneline -1"
# apt inside the chroot: the packages the scripts install come from the
# same mirror as the host's.
echo "deb $mirror bookworm main" >"$DIR/etc/apt/sources.list"

mount -t proc proc "$DIR/proc"
mount --rbind /sys "$DIR/sys"
mount --rbind /dev "$DIR/dev"
# /var/run is a symbolic link to /run there: bind the socket under the
# chroot's own /run (following the link from outside would reach the host's).
mkdir -p "$DIR/run"
touch "$DIR/run/docker.sock"
mount --bind "$(readlink -f /var/run/docker.sock)" "$DIR/run/docker.sock"
mount -t tmpfs tmpfs "$DIR/tmp"

if ((!keep)); then
	log "removing the images the scripts build, so that they are built from scratch"
	docker image rm -f seqkeeper:dev minio/minio:latest seqkeeper/minio-standin:dev \
		zookeeper:3.8 seqkeeper/zookeeper-standin:dev >/dev/null 2>&1 || true
fi

start=$SECONDS
log "running 'bash scripts/$cmd.sh' in the chroot (only Go and Docker, empty caches)"
set +e
chroot "$DIR" /usr/bin/env -i HOME=/root PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
	TERM=dumb LANG=C.UTF-8 bash -c "cd /src/seqkeeper && $run"
status=$?
set -e
log "'bash scripts/$cmd.sh' on the fresh machine: exit $status after $((SECONDS - start))s"
exit "$status"
