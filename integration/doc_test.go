// Package integration runs seqkeeper against real servers in containers: a
// ZooKeeper ensemble, MinIO and seqkeeper replicas, each its own host on a
// private Docker network, so that tests can stop, kill, pause and partition
// them one by one. Every test (and each of TestChaos's clusters) runs its
// own cluster, a few side by side: they take cluster slots in a fixed
// order, longest first, and the upgrade tests, which assert timings, two
// of the three (slots_test.go).
//
// The directory is a Go module of its own
// (github.com/seqkeeper/seqkeeper/integration) holding only test files, so
// that testcontainers-go and the Docker client it needs stay out of the
// module graph of programs that import seqkeeper. Run it from here:
//
//	cd integration && go test -race -count=1 ./...
//
// The images are built locally by scripts/images.sh (no registry is needed
// or used); NewCluster fails the test, naming the missing image, when one is
// absent. TestRollingUpgrade also needs the earlier release that
// scripts/upgrade-from.sh builds, and fails the same way without it;
// TestAlertsFireInPrometheus needs the Prometheus server of Debian's
// prometheus package, which scripts/setup.sh installs. Set
// TESTCONTAINERS_RYUK_DISABLED=true (TestMain does) since the Ryuk reaper image cannot be pulled either. Published ports are reached at
// 127.0.0.1 when the Docker daemon shares this network namespace, even in a
// container (see publishedHost); TESTCONTAINERS_HOST_OVERRIDE overrides
// that. Docker learns a container's name on the network some time after the
// container starts, so every cluster also runs a resolver container, and
// NewCluster, Node.Start and Node.Reconnect return only once it resolves
// the ZooKeeper servers' and MinIO's names (waitResolvable). Containers and networks carry the label org.seqkeeper.integration,
// so anything a killed test run leaves behind can be removed with
//
//	docker rm -f $(docker ps -aq --filter label=org.seqkeeper.integration)
//	docker network prune --filter label=org.seqkeeper.integration
package integration
