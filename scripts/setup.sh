#!/usr/bin/env bash
# Installs what seqkeeper's tests and demo need on a fresh machine, each part
# only when it is missing: the ZooKeeper 3.8 package (for package tests), a
# JRE, debootstrap, Prometheus (promtool and the server, for the alert
# tests; on a host that runs systemd, Debian's package also starts a
# prometheus service on :9090, which the tests do not use: 'systemctl
# disable --now prometheus' stops it), chromium (the status console's
# browser test), staticcheck, the MinIO binary and the container images.
# Safe to run again; a warm machine finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
# Logs to standard output, unlike lib.sh's log.
log() { printf '%s setup: %s\n' "$(date +%H:%M:%S)" "$*"; }

ensure_packages log -:zookeeper java:openjdk-17-jre-headless debootstrap:debootstrap promtool:prometheus \
	curl:curl -:ca-certificates chromium:chromium || exit 2

if ! command -v staticcheck >/dev/null 2>&1 && [[ ! -x "$(go env GOPATH)/bin/staticcheck" ]]; then
	log "installing staticcheck"
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

if command -v docker >/dev/null 2>&1; then
	bash scripts/images.sh
else
	# Without Docker the package tests and internal/tools/localstack run;
	# the demo and the container suite (integration/) need the images.
	bash scripts/images.sh --binaries
	log "no docker: built the MinIO binary only; the demo and the container suite need Docker and 'bash scripts/images.sh'"
fi
log "ready"
