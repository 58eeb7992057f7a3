#!/usr/bin/env bash
# Builds the container images that docker-compose.yml and the integration
# suite (./integration) use, without any container registry:
#
#   seqkeeper:dev                      the seqkeeper binary in an empty image
#   minio/minio:latest                 MinIO built from source
#     (also seqkeeper/minio-standin:dev)
#   zookeeper:3.8                      Debian's ZooKeeper 3.8 with the official
#     (also seqkeeper/zookeeper-standin:dev)  image's environment conventions
#
# Each image is built only when it is missing or its inputs changed (every
# image carries the hash of its inputs in the label org.seqkeeper.inputs;
# seqkeeper:dev hashes the freshly built binary, so it follows the sources).
# Slow inputs are cached in ${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/seqkeeper}:
# bin/minio (go install, ~5 min) and the debootstrap'ed ZooKeeper root file
# system (~90 s). Delete them there to rebuild them from scratch.
#
#   bash scripts/images.sh           build what is missing or stale
#   bash scripts/images.sh --force   rebuild every image (reuses the cache)
#   bash scripts/images.sh --check   exit 1 listing missing images; builds nothing
#   bash scripts/images.sh --mirror  print the Debian mirror debootstrap uses
#   bash scripts/images.sh --binaries  only the MinIO binary (no Docker needed:
#                                    package tests, internal/tools/localstack)
#
# An image named zookeeper:3.8 or minio/minio:latest that this script did not
# build (the real one, pulled from a registry) is left alone unless --force.
# The Debian mirror for debootstrap is read from the host's apt sources;
# SEQKEEPER_DEBIAN_MIRROR overrides it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}"
IMAGES_DIR="$ROOT/integration/images"

MINIO_MODULE=github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_BIN="$CACHE/bin/minio"
ZK_SUITE=bookworm
ZK_PACKAGES=openjdk-17-jre-headless,zookeeper
ZK_ROOTFS="$CACHE/zookeeper-rootfs-$ZK_SUITE.tar"

SEQKEEPER_IMAGE=seqkeeper:dev
CA_BUNDLE="${SEQKEEPER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
MINIO_IMAGES=(minio/minio:latest seqkeeper/minio-standin:dev)
ZK_IMAGES=(zookeeper:3.8 seqkeeper/zookeeper-standin:dev)

INPUTS_LABEL=org.seqkeeper.inputs
STANDIN_LABEL=org.seqkeeper.standin

log() { printf '%s images: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

force=0
check=0
mirror_only=0
binaries_only=0
for arg in "$@"; do
	case "$arg" in
	--force) force=1 ;;
	--check) check=1 ;;
	--mirror) mirror_only=1 ;;
	--binaries) binaries_only=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# image_id IMAGE prints the image's ID, or nothing.
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }

# drop_replaced OLD_ID IMAGE removes the image IMAGE was before a rebuild,
# unless something (another tag, a container) still uses it.
drop_replaced() {
	[[ -n "$1" && "$1" != "$(image_id "$2")" ]] || return 0
	docker rmi "$1" >/dev/null 2>&1 || true
}

# label IMAGE NAME prints the label's value, or nothing.
label() {
	local v
	v="$(docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null)" || return 0
	[[ "$v" == "<no value>" ]] || printf '%s' "$v"
}

# hash_files FILE... prints one sha256 over the names and contents.
hash_files() {
	local f
	for f in "$@"; do
		printf '%s\n' "${f##*/}"
		sha256sum <"$f"
	done | sha256sum | cut -d' ' -f1
}

# up_to_date HASH IMAGE... succeeds when every image exists with these inputs
# (and --force was not given).
up_to_date() {
	local hash="$1" image
	shift
	((force)) && return 1
	for image in "$@"; do
		[[ "$(label "$image" "$INPUTS_LABEL")" == "$hash" ]] || return 1
	done
}

# foreign IMAGE succeeds when IMAGE exists and this script did not build it.
foreign() {
	((force)) && return 1
	image_exists "$1" && [[ -z "$(label "$1" "$STANDIN_LABEL")" ]]
}

# build KIND HASH CONTEXT IMAGE... runs docker build with the labels.
build() {
	local kind="$1" hash="$2" context="$3"
	shift 3
	local tags=() image old
	old="$(image_id "$1")"
	for image in "$@"; do
		tags+=(-t "$image")
	done
	((force)) && tags+=(--no-cache)
	if ! docker build --label "$INPUTS_LABEL=$hash" --label "$STANDIN_LABEL=$kind" "${tags[@]}" "$context" >"$context.build.log" 2>&1; then
		tail -n 30 "$context.build.log" >&2
		rm -f "$context.build.log"
		die "docker build of $* failed"
	fi
	rm -f "$context.build.log"
	drop_replaced "$old" "$1"
}

scratch_dirs=()
cleanup() {
	local d m
	for d in "${scratch_dirs[@]}"; do
		# A failed debootstrap can leave /proc or /sys mounted in its target.
		awk -v d="$d/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
			while IFS= read -r m; do
				umount -l "$m" 2>/dev/null || true
			done
		rm -rf --one-file-system "$d"
	done
}
trap cleanup EXIT

# scratch VAR sets VAR to a new temporary directory, removed on exit (not
# printed: the list of directories would not leave a $(...) subshell). It
# lives in the cache, not /tmp: debootstrap needs device nodes and exec,
# and the ZooKeeper image tarball is 600 MB.
scratch() {
	local d
	mkdir -p "$CACHE/tmp"
	d="$(mktemp -d "$CACHE/tmp/images.XXXXXX")"
	scratch_dirs+=("$d")
	printf -v "$1" '%s' "$d"
}

# heartbeat WHAT [VAR=value...] COMMAND... runs COMMAND (with the
# environment assignments) and logs "WHAT: still running" every 30 s, so a
# long build never looks stuck.
heartbeat() {
	local what="$1" start=$SECONDS pid status=0
	shift
	(
		while sleep 30; do
			log "$what: still running ($((SECONDS - start))s)"
		done
	) &
	pid=$!
	env "$@" || status=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	return "$status"
}

# timed NAME FUNCTION runs FUNCTION and reports how long it took.
timed() {
	local name="$1" start=$SECONDS
	shift
	"$@"
	log "$name: done in $((SECONDS - start))s"
}

# --- seqkeeper:dev -----------------------------------------------------------

# head_commit prints the checked-out commit by reading .git directly.
head_commit() {
	local head ref
	head="$(cat "$ROOT/.git/HEAD" 2>/dev/null)" || return 1
	if [[ "$head" == "ref: "* ]]; then
		ref="${head#ref: }"
		if [[ -f "$ROOT/.git/$ref" ]]; then
			head="$(cat "$ROOT/.git/$ref")"
		else
			head="$(awk -v r="$ref" '$2 == r { print $1 }' "$ROOT/.git/packed-refs" 2>/dev/null)"
		fi
	fi
	[[ "$head" =~ ^[0-9a-f]{40}$ ]] && printf '%s' "$head"
}

build_seqkeeper() {
	local ctx version="" revision="" created="" ldflags=() hash
	scratch ctx
	cp "$IMAGES_DIR/seqkeeper/Dockerfile" "$ctx/"
	# HTTPS to S3 needs the CA certificates: the host's bundle goes in.
	[[ -s "$CA_BUNDLE" ]] || die "no CA certificates at $CA_BUNDLE: apt-get install ca-certificates (or set SEQKEEPER_CA_BUNDLE)"
	cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
	printf 'root:x:0:0:root:/:/sbin/nologin\nseqkeeper:x:65532:65532:seqkeeper:/:/sbin/nologin\n' >"$ctx/passwd"
	printf 'root:x:0:\nseqkeeper:x:65532:\n' >"$ctx/group"
	if version="$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null)"; then
		revision="$(git -C "$ROOT" rev-parse HEAD)"
		# The commit's time, not the build's: the same sources give the
		# same image, so it is not rebuilt for nothing.
		created="$(git -C "$ROOT" log -1 --format=%cI)"
	elif revision="$(head_commit)"; then
		version="devel-${revision:0:12}" # a clone, but no git program here
	fi
	[[ -n "$version" ]] && ldflags=(-ldflags "-X main.version=$version")
	printf 'LABEL org.opencontainers.image.version="%s" org.opencontainers.image.revision="%s" org.opencontainers.image.created="%s"\n' \
		"${version:-devel}" "$revision" "$created" >>"$ctx/Dockerfile"
	log "$SEQKEEPER_IMAGE: go build ./cmd/seqkeeper${version:+ (version $version)}"
	# -buildvcs=false: the version is stamped above; VCS stamping would also
	# change the binary (and so force an image rebuild) on every commit time.
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false "${ldflags[@]}" -o "$ctx/seqkeeper" ./cmd/seqkeeper)
	hash="$(hash_files "$ctx/Dockerfile" "$ctx/seqkeeper" "$ctx/ca-certificates.crt" "$ctx/passwd" "$ctx/group")"
	if up_to_date "$hash" "$SEQKEEPER_IMAGE"; then
		log "$SEQKEEPER_IMAGE: up to date"
		return
	fi
	log "$SEQKEEPER_IMAGE: docker build"
	build seqkeeper "$hash" "$ctx" "$SEQKEEPER_IMAGE"
}

# --- minio/minio:latest ------------------------------------------------------

minio_binary() {
	if [[ ! -x "$MINIO_BIN" ]]; then
		log "MinIO: go install $MINIO_MODULE into $CACHE/bin (takes about 5 minutes)"
		mkdir -p "$CACHE/bin"
		heartbeat "MinIO: go install" CGO_ENABLED=0 GOBIN="$CACHE/bin" go install "$MINIO_MODULE"
	fi
}

build_minio() {
	local ctx hash
	if foreign "${MINIO_IMAGES[0]}"; then
		log "${MINIO_IMAGES[0]}: present and not built here; keeping it (--force replaces it)"
		return
	fi
	minio_binary
	hash="$(hash_files "$IMAGES_DIR/minio/Dockerfile" "$MINIO_BIN")"
	if up_to_date "$hash" "${MINIO_IMAGES[@]}"; then
		log "${MINIO_IMAGES[0]}: up to date"
		return
	fi
	scratch ctx
	cp "$IMAGES_DIR/minio/Dockerfile" "$MINIO_BIN" "$ctx/"
	mkdir -p "$ctx/data" "$ctx/tmp"
	chmod 1777 "$ctx/tmp"
	log "${MINIO_IMAGES[0]}: docker build"
	build minio "$hash" "$ctx" "${MINIO_IMAGES[@]}"
}

# --- zookeeper:3.8 -----------------------------------------------------------

# debian_mirror prints the host's Debian mirror for $ZK_SUITE, read from the
# apt sources (deb822 *.sources first, then one-line sources.list files).
debian_mirror() {
	if [[ -n "${SEQKEEPER_DEBIAN_MIRROR:-}" ]]; then
		printf '%s' "$SEQKEEPER_DEBIAN_MIRROR"
		return
	fi
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f "$f" ]] || continue
		uri="$(awk -v suite="$ZK_SUITE" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^[ \t]*#/) continue
					key = tolower(line); sub(/:.*/, "", key)
					sub(/^[^:]*:[ \t]*/, "", line)
					if (key == "types") types = line
					else if (key == "uris") uris = line
					else if (key == "suites") suites = line
					else if (key == "enabled") enabled = tolower(line)
				}
				if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) {
					split(uris, u, /[ \t]+/); print u[1]; exit
				}
			}' "$f")"
		if [[ -n "$uri" ]]; then
			printf '%s' "$uri"
			return
		fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f "$f" ]] || continue
		uri="$(awk -v suite="$ZK_SUITE" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}' "$f")"
		if [[ -n "$uri" ]]; then
			printf '%s' "$uri"
			return
		fi
	done
	die "no apt source for Debian $ZK_SUITE on this host; set SEQKEEPER_DEBIAN_MIRROR to a Debian mirror URL"
}

# zk_rootfs debootstraps Debian with ZooKeeper into the cached tarball.
zk_rootfs() {
	[[ -s "$ZK_ROOTFS" && -s "$ZK_ROOTFS.sha256" ]] && return
	command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap (or run scripts/setup.sh)"
	[[ "$(id -u)" == 0 ]] || die "debootstrap needs root: run this script as root once (the result is cached in $CACHE)"
	local mirror dir
	mirror="$(debian_mirror)"
	scratch dir
	log "ZooKeeper: debootstrap --variant=minbase --include=$ZK_PACKAGES $ZK_SUITE from $mirror (about 90 s)"
	heartbeat "ZooKeeper: debootstrap" bash -c 'exec "$@" >"$0" 2>&1' "$dir/debootstrap.log" \
		debootstrap --variant=minbase --include="$ZK_PACKAGES" "$ZK_SUITE" "$dir/root" "$mirror" ||
		{
			tail -n 20 "$dir/debootstrap.log" >&2
			die "debootstrap failed"
		}
	# Package caches and documentation are not needed at run time.
	rm -rf "$dir/root/var/cache/apt/"*.bin "$dir/root/var/cache/apt/archives/"*.deb "$dir/root/var/lib/apt/lists/"* \
		"$dir/root/usr/share/doc/"* "$dir/root/usr/share/man/"* "$dir/root/usr/share/info/"* "$dir/root/usr/share/locale/"*
	mkdir -p "$CACHE"
	tar -C "$dir/root" --numeric-owner -cf "$ZK_ROOTFS.tmp" .
	sha256sum <"$ZK_ROOTFS.tmp" | cut -d' ' -f1 >"$ZK_ROOTFS.sha256.tmp"
	mv "$ZK_ROOTFS.tmp" "$ZK_ROOTFS"
	mv "$ZK_ROOTFS.sha256.tmp" "$ZK_ROOTFS.sha256"
	log "ZooKeeper: root file system cached in $ZK_ROOTFS ($(du -h "$ZK_ROOTFS" | cut -f1))"
}

# zk_changes prints the image configuration (one Dockerfile instruction per
# line) for docker import --change, without comments and blank lines.
zk_changes() {
	grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$IMAGES_DIR/zookeeper/changes"
}

build_zookeeper() {
	local hash ctx line old files=() changes=()
	if foreign "${ZK_IMAGES[0]}"; then
		log "${ZK_IMAGES[0]}: present and not built here; keeping it (--force replaces it)"
		return
	fi
	zk_rootfs
	mapfile -t files < <(cd "$IMAGES_DIR/zookeeper" && find changes rootfs -type f | sort)
	hash="$( (
		cat "$ZK_ROOTFS.sha256"
		cd "$IMAGES_DIR/zookeeper" && hash_files "${files[@]}"
	) | sha256sum | cut -d' ' -f1)"
	if up_to_date "$hash" "${ZK_IMAGES[@]}"; then
		log "${ZK_IMAGES[0]}: up to date"
		return
	fi
	# The image is one layer: the cached root file system with the files of
	# integration/images/zookeeper/rootfs appended (all new paths: docker
	# import refuses duplicates), imported with the configuration in
	# integration/images/zookeeper/changes. A docker build on top would cost
	# seconds per instruction.
	scratch ctx
	cp -a "$IMAGES_DIR/zookeeper/rootfs" "$ctx/overlay"
	mkdir -p "$ctx/overlay/conf" "$ctx/overlay/data" "$ctx/overlay/datalog" "$ctx/overlay/logs"
	chmod -R u=rwX,go=rX "$ctx/overlay"
	chmod 0755 "$ctx/overlay/docker-entrypoint.sh"
	cp "$ZK_ROOTFS" "$ctx/image.tar"
	# Only the new files and directories: entries for existing directories
	# such as / or /etc would replace their modes.
	(cd "$ctx/overlay" && tar -rf "$ctx/image.tar" --owner=0 --group=0 --numeric-owner \
		./docker-entrypoint.sh ./usr/share/zookeeper/libexec ./etc/zookeeper/console-log \
		./conf ./data ./datalog ./logs)
	while IFS= read -r line; do
		changes+=(--change "$line")
	done < <(zk_changes)
	changes+=(--change "LABEL $INPUTS_LABEL=$hash $STANDIN_LABEL=zookeeper")
	log "${ZK_IMAGES[0]}: docker import"
	old="$(image_id "${ZK_IMAGES[0]}")"
	docker import "${changes[@]}" "$ctx/image.tar" "${ZK_IMAGES[0]}" >/dev/null
	for line in "${ZK_IMAGES[@]:1}"; do
		docker tag "${ZK_IMAGES[0]}" "$line"
	done
	drop_replaced "$old" "${ZK_IMAGES[0]}"
}

# --- main --------------------------------------------------------------------

if ((binaries_only)); then
	minio_binary
	log "MinIO binary ready: $MINIO_BIN"
	exit 0
fi

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (is it running, may this user use it?)"

if ((check)); then
	missing=()
	for image in "$SEQKEEPER_IMAGE" "${MINIO_IMAGES[0]}" "${ZK_IMAGES[0]}"; do
		image_exists "$image" || missing+=("$image")
	done
	if ((${#missing[@]})); then
		log "missing images: ${missing[*]}; build them with: bash scripts/images.sh"
		exit 1
	fi
	log "all images present: $SEQKEEPER_IMAGE ${MINIO_IMAGES[0]} ${ZK_IMAGES[0]}"
	exit 0
fi

if ((mirror_only)); then
	debian_mirror
	echo
	exit 0
fi

mkdir -p "$CACHE"
# Two runs at once would race on the cache and the tags.
exec 9>"$CACHE/images.lock"
flock 9

total=$SECONDS
timed "$SEQKEEPER_IMAGE" build_seqkeeper
timed "${MINIO_IMAGES[0]}" build_minio
timed "${ZK_IMAGES[0]}" build_zookeeper
log "all images ready in $((SECONDS - total))s"
