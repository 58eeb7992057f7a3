# Sourced by run.sh and latch.sh: installs Debian's Curator packages when
# they are missing (apt-get, as root), and compiles the program named by
# $1 (CuratorBench or LatchBench) into $SEQKEEPER_CACHE (default
# ~/.cache/seqkeeper)/curator-bench when its source is newer than the
# build. Sets cp (the classpath) and out (where the class is).
jars=/usr/share/java
if [[ ! -f $jars/curator-recipes.jar ]]; then
	echo "curator: installing Debian's Curator packages" >&2
	apt-get install -y -q libcurator-recipes-java libcurator-framework-java libcurator-client-java >&2
fi
cp=$jars/curator-recipes.jar:$jars/curator-framework.jar:$jars/curator-client.jar:$jars/guava.jar
cp=$cp:$jars/zookeeper.jar:$jars/zookeeper-jute.jar:$jars/slf4j-api.jar:$jars/slf4j-nop.jar

out=${SEQKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seqkeeper}/curator-bench
if [[ ! -f $out/$1.class || $here/$1.java -nt $out/$1.class ]]; then
	mkdir -p "$out"
	javac -d "$out" -cp "$cp" "$here/$1.java"
fi
