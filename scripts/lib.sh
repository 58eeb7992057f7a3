# Shared by scripts/setup.sh, demo.sh, validate-manifests.sh and
# render-manifests.sh (source it; not a program).

# log MESSAGE... writes MESSAGE to standard error after the time and the
# script's tag: LOG_TAG, set before sourcing (default: the script's name
# without .sh). A script that logs elsewhere defines its own log after
# sourcing this.
log() { printf '%s %s: %s\n' "$(date +%H:%M:%S)" "${LOG_TAG:-$(basename "$0" .sh)}" "$*" >&2; }

# die MESSAGE... logs "error: MESSAGE" and exits 1.
die() {
	log "error: $*"
	exit 1
}

# ensure_packages LOG CMD:PKG... installs, with apt-get, the Debian package
# PKG of every command CMD that is missing (CMD "-" checks the package with
# dpkg instead). Needs root when something is missing; otherwise it says the
# one command that installs it and returns 2.
ensure_packages() {
	local log="$1" pair cmd pkg need=()
	shift
	for pair in "$@"; do
		cmd="${pair%%:*}" pkg="${pair#*:}"
		if [[ "$cmd" == - ]]; then
			dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
		else
			command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
		fi
	done
	((${#need[@]})) || return 0
	if [[ $(id -u) -ne 0 ]]; then
		"$log" "missing Debian packages: ${need[*]}; install them as root: apt-get install ${need[*]}"
		return 2
	fi
	"$log" "installing ${need[*]} (apt-get)"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
	"$log" "installed ${need[*]}"
}

# go_tool LOG PACKAGE@VERSION prints the path of the command PACKAGE built
# at VERSION, installing it with go install (from the Go module proxy) into
# GOBIN, or GOPATH/bin, when it is missing or was built from another version.
go_tool() {
	local log="$1" want="${2##*@}" dir bin have
	dir="$(go env GOBIN)"
	[[ -n "$dir" ]] || dir="$(go env GOPATH)/bin"
	bin="$dir/$(basename "${2%@*}")"
	have="$(go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }')"
	if [[ "$have" != "$want" ]]; then
		"$log" "installing $2${have:+ (found $have)}"
		go install "$2" >&2 || return 1
	fi
	printf '%s\n' "$bin"
}
