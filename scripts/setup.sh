#!/usr/bin/env bash
# Installs what seqkeeper's tests and demo need on a fresh machine, each part
# only when it is missing: the ZooKeeper 3.8 package (for package tests), a
# JRE, debootstrap, staticcheck, the MinIO binary and the container images.
# Safe to run again; a warm machine finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '%s setup: %s\n' "$(date +%H:%M:%S)" "$*"; }

need_pkgs=()
dpkg -s zookeeper >/dev/null 2>&1 || need_pkgs+=(zookeeper)
command -v java >/dev/null 2>&1 || need_pkgs+=(openjdk-17-jre-headless)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
if ((${#need_pkgs[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		log "missing Debian packages: ${need_pkgs[*]}; install them as root: apt-get install ${need_pkgs[*]}"
		exit 2
	fi
	log "installing ${need_pkgs[*]}"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
fi

if ! command -v staticcheck >/dev/null 2>&1 && [[ ! -x "$(go env GOPATH)/bin/staticcheck" ]]; then
	log "installing staticcheck"
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

bash scripts/images.sh
log "ready"
