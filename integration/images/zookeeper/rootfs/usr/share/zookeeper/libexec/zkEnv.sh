# ZooKeeper environment of the seqkeeper ZooKeeper stand-in image.
#
# Debian's zkServer.sh, zkCli.sh and zkCleanup.sh source ../libexec/zkEnv.sh
# when it exists, else bin/zkEnv.sh, a symlink to the package's
# /etc/zookeeper/conf/environment, which hard-codes /etc/zookeeper/conf and a
# log file. This one follows the official image instead: the configuration
# lives in $ZOOCFGDIR (/conf) and the server log goes to the console, so
# `docker logs` shows it.
ZOOMAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
ZOOCFGDIR="${ZOOCFGDIR:-/conf}"
ZOOCFG="$ZOOCFGDIR/zoo.cfg"
ZOO_LOG_DIR="${ZOO_LOG_DIR:-/logs}"
JMXLOCALONLY=true
JAVA=/usr/bin/java

# The Debian zookeeper.jar puts only slf4j-api on its class path: without a
# binding slf4j drops every log line. slf4j-simple (from libslf4j-java, a
# dependency of the package) writes them to stdout, configured by
# /etc/zookeeper/console-log/simplelogger.properties. $ZOOCFGDIR comes first
# so a simplelogger.properties there overrides it. The AdminServer (Jetty,
# admin.enableServer) also needs the servlet API, missing from the manifest.
# zookeeper.jar's manifest lists the Netty jars of a plain client port;
# the TLS port (secureClientPort, NettyServerCnxnFactory) also needs
# netty-codec and netty-resolver, as the official image's lib/ has them.
CLASSPATH="$ZOOCFGDIR:/etc/zookeeper/console-log:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/servlet-api.jar:/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar"
