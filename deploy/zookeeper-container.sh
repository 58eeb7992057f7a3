# Sourced by deploy/kubernetes/test-pod.sh and deploy/systemd/test-unit.sh:
# one ZooKeeper 3.8 in quorum mode (standaloneEnabled=false and a
# server.1= line, as seqkeeper serve requires) on a Docker network, with
# the official image's environment.
#
#   start_zookeeper NAME NETWORK ALIAS...
start_zookeeper() {
	local name=$1 net=$2
	shift 2
	local aliases=()
	for a in "$@"; do aliases+=(--network-alias "$a"); done
	docker run -d --name "$name" --network "$net" "${aliases[@]}" -e ZOO_MY_ID=1 \
		-e 'ZOO_SERVERS=server.1=0.0.0.0:2888:3888;2181' -e ZOO_STANDALONE_ENABLED=false \
		-e JVMFLAGS=-Xmx256m zookeeper:3.8 >/dev/null
}
