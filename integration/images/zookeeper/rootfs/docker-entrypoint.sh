#!/bin/bash
# Entrypoint of the seqkeeper ZooKeeper stand-in image. It follows the official
# `zookeeper` image's conventions (same variables, same defaults, same files)
# so that docker-compose.yml and the integration harness work unchanged with
# either image:
#
#   ZOO_CONF_DIR (/conf)  ZOO_DATA_DIR (/data)  ZOO_DATA_LOG_DIR (/datalog)
#   ZOO_LOG_DIR (/logs)   ZOO_TICK_TIME (2000)  ZOO_INIT_LIMIT (5)
#   ZOO_SYNC_LIMIT (2)    ZOO_AUTOPURGE_PURGEINTERVAL (0)
#   ZOO_AUTOPURGE_SNAPRETAINCOUNT (3)  ZOO_MAX_CLIENT_CNXNS (60)
#   ZOO_STANDALONE_ENABLED (true)  ZOO_ADMINSERVER_ENABLED (true)
#   ZOO_4LW_COMMANDS_WHITELIST (srvr)  ZOO_MY_ID (1, written to $ZOO_DATA_DIR/myid)
#   ZOO_SERVERS ("server.1=localhost:2888:3888;2181", space-separated)
#   ZOO_CFG_EXTRA (space-separated key=value lines)  JVMFLAGS
#
# zoo.cfg is generated only when $ZOO_CONF_DIR/zoo.cfg does not exist, and
# myid only when it does not exist, so a mounted configuration or a restarted
# container keeps its own.
set -euo pipefail

: "${ZOO_CONF_DIR:=/conf}" "${ZOO_DATA_DIR:=/data}" "${ZOO_DATA_LOG_DIR:=/datalog}" "${ZOO_LOG_DIR:=/logs}"
: "${ZOO_TICK_TIME:=2000}" "${ZOO_INIT_LIMIT:=5}" "${ZOO_SYNC_LIMIT:=2}"
: "${ZOO_AUTOPURGE_PURGEINTERVAL:=0}" "${ZOO_AUTOPURGE_SNAPRETAINCOUNT:=3}"
: "${ZOO_MAX_CLIENT_CNXNS:=60}" "${ZOO_STANDALONE_ENABLED:=true}" "${ZOO_ADMINSERVER_ENABLED:=true}"
: "${ZOO_4LW_COMMANDS_WHITELIST:=srvr}"
export ZOO_LOG_DIR
export ZOOCFGDIR="${ZOOCFGDIR:-$ZOO_CONF_DIR}"

# Like the official image (which uses gosu): start the server as the
# unprivileged zookeeper user, owning its directories. `docker run --user`
# still works because this branch is only taken as root.
if [[ "${1:-}" == zkServer.sh && "$(id -u)" == 0 ]]; then
	mkdir -p "$ZOO_CONF_DIR" "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
	chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
	# The configuration directory may be a read-only mount.
	chown zookeeper:zookeeper "$ZOO_CONF_DIR" 2>/dev/null || true
	exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
fi

if [[ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]]; then
	config="$ZOO_CONF_DIR/zoo.cfg"
	{
		echo "dataDir=$ZOO_DATA_DIR"
		echo "dataLogDir=$ZOO_DATA_LOG_DIR"
		echo "tickTime=$ZOO_TICK_TIME"
		echo "initLimit=$ZOO_INIT_LIMIT"
		echo "syncLimit=$ZOO_SYNC_LIMIT"
		echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
		echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
		echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
		echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
		echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
		for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
			echo "$server"
		done
		if [[ -n "$ZOO_4LW_COMMANDS_WHITELIST" ]]; then
			echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
		fi
		for entry in ${ZOO_CFG_EXTRA:-}; do
			echo "$entry"
		done
	} >"$config"
fi

if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
	mkdir -p "$ZOO_DATA_DIR"
	echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi

exec "$@"
