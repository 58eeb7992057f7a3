#!/usr/bin/env bash
# Builds the earlier release that the container suite's rolling upgrade test
# (integration/upgrade_test.go) upgrades from and rolls back to, from a git
# worktree of its commit, without any container registry:
#
#   seqkeeper:rev-<commit>   its seqkeeper binary in its own scratch image
#                            (its integration/images/seqkeeper/Dockerfile)
#   $CACHE/upgrade/<commit>/worker.test
#                            its container suite's test binary (-race), whose
#                            TestChaosWorkerProcess is a library worker of
#                            that release
#
# The commit is SEQKEEPER_UPGRADE_FROM (a commit or anything git rev-parse
# reads), else the one in integration/images/upgrade-from (v0.1.0). The
# binaries are built once per commit and kept in
# CACHE=${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/seqkeeper}; the image
# is made again from them when it is missing (a fresh Docker daemon). The
# earlier commit's modules come from the Go module proxy.
#
#   bash scripts/upgrade-from.sh           build what is missing
#   bash scripts/upgrade-from.sh --check   exit 1 naming what is missing
#   bash scripts/upgrade-from.sh --print   print the commit, the image and the
#                                          worker binary, a line each (built or not)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}"
CA_BUNDLE="${SEQKEEPER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
INPUTS_LABEL=org.seqkeeper.inputs

log() { printf '%s upgrade-from: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

mode=build
case "${1:-}" in
"") ;;
--check) mode=check ;;
--print) mode=print ;;
-h | --help)
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "usage: $0 [--check | --print]" >&2
	exit 2
	;;
esac

from="${SEQKEEPER_UPGRADE_FROM:-$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$ROOT/integration/images/upgrade-from" | head -n 1)}"
commit="$(git -C "$ROOT" rev-parse --verify --quiet "$from^{commit}")" ||
	die "commit $from is not in this clone (a shallow clone? git fetch --unshallow)"
DIR="$CACHE/upgrade/$commit"
IMAGE="seqkeeper:rev-$commit"
if [[ "$mode" == print ]]; then
	printf '%s\n' "$commit" "$IMAGE" "$DIR/worker.test"
	exit 0
fi

image_exists() { docker image inspect "$IMAGE" >/dev/null 2>&1; }

if [[ "$mode" == check ]]; then
	missing=()
	[[ -x "$DIR/worker.test" ]] || missing+=("$DIR/worker.test")
	image_exists || missing+=("$IMAGE")
	if ((${#missing[@]})); then
		log "missing: ${missing[*]}; build them with: ${SEQKEEPER_UPGRADE_FROM:+SEQKEEPER_UPGRADE_FROM=$SEQKEEPER_UPGRADE_FROM }bash scripts/upgrade-from.sh"
		exit 1
	fi
	log "present: $IMAGE and $DIR/worker.test"
	exit 0
fi

command -v docker >/dev/null || die "docker is not installed"
mkdir -p "$DIR" "$CACHE/tmp"
# Two runs at once would race on the cache and the tag.
exec 9>"$CACHE/upgrade/build.lock"
flock 9

src=""
cleanup() {
	if [[ -n "$src" ]]; then
		git -C "$ROOT" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
		git -C "$ROOT" worktree prune 2>/dev/null || true
	fi
}
trap cleanup EXIT

if [[ ! -x "$DIR/seqkeeper" || ! -x "$DIR/worker.test" || ! -s "$DIR/version" ]]; then
	start=$SECONDS
	version="$(git -C "$ROOT" describe --tags --always "$commit")"
	src="$(mktemp -d "$CACHE/tmp/upgrade-src.XXXXXX")"
	git -C "$ROOT" worktree add --detach --quiet "$src" "$commit"
	log "$version: go build ./cmd/seqkeeper (static, as scripts/images.sh builds it)"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-X main.version=$version" \
		-o "$DIR/seqkeeper.tmp" ./cmd/seqkeeper)
	log "$version: go test -c -race in integration/ (its library workers; takes a few minutes the first time)"
	(cd "$src/integration" && go test -c -race -buildvcs=false -o "$DIR/worker.test.tmp" .)
	"$DIR/worker.test.tmp" -test.list '^TestChaosWorkerProcess$' | grep -qx TestChaosWorkerProcess ||
		die "$version's container suite has no TestChaosWorkerProcess: it cannot run library workers"
	mv "$DIR/seqkeeper.tmp" "$DIR/seqkeeper"
	mv "$DIR/worker.test.tmp" "$DIR/worker.test"
	echo "$version" >"$DIR/version"
	log "$version: built in $((SECONDS - start))s into $DIR"
fi
# The version the binary was stamped with (a tag made since changes
# git describe, not the binary): its image is labelled with it.
version="$(cat "$DIR/version")"

# The image: the release's own Dockerfile over the cached binary.
[[ -s "$CA_BUNDLE" ]] || die "no CA certificates at $CA_BUNDLE: apt-get install ca-certificates (or set SEQKEEPER_CA_BUNDLE)"
ctx="$(mktemp -d "$CACHE/tmp/upgrade-image.XXXXXX")"
trap 'rm -rf "$ctx"; cleanup' EXIT
git -C "$ROOT" show "$commit:integration/images/seqkeeper/Dockerfile" >"$ctx/Dockerfile" ||
	die "$version has no integration/images/seqkeeper/Dockerfile"
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
cp "$DIR/seqkeeper" "$ctx/seqkeeper"
printf 'root:x:0:0:root:/:/sbin/nologin\nseqkeeper:x:65532:65532:seqkeeper:/:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nseqkeeper:x:65532:\n' >"$ctx/group"
printf 'LABEL org.opencontainers.image.version="%s" org.opencontainers.image.revision="%s" org.opencontainers.image.created="%s"\n' \
	"$version" "$commit" "$(git -C "$ROOT" log -1 --format=%cI "$commit")" >>"$ctx/Dockerfile"
hash="$(cd "$ctx" && sha256sum Dockerfile seqkeeper ca-certificates.crt passwd group | sha256sum | cut -d' ' -f1)"
if [[ "$(docker image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" "$IMAGE" 2>/dev/null)" == "$hash" ]]; then
	log "$IMAGE: up to date"
	exit 0
fi
log "$IMAGE: docker build"
if ! docker build --label "$INPUTS_LABEL=$hash" -t "$IMAGE" "$ctx" >"$ctx/build.log" 2>&1; then
	tail -n 30 "$ctx/build.log" >&2
	die "docker build of $IMAGE failed"
fi
log "$IMAGE: ready ($version, $commit)"
