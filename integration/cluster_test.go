package integration

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The images a cluster runs; scripts/images.sh builds all three.
const (
	ZooKeeperImage = "zookeeper:3.8"
	MinIOImage     = "minio/minio:latest"
	SeqkeeperImage = "seqkeeper:dev"
)

// Container ports, in the form the Node methods take.
const (
	ZooKeeperPort = "2181/tcp"
	MinIOPort     = "9000/tcp"
	ReplicaPort   = "7070/tcp"
)

// MinIO credentials of every cluster (the official image's defaults).
const (
	MinIOUser     = "minioadmin"
	MinIOPassword = "minioadmin"
)

// MinIOAlias is the MinIO container's name on the cluster network.
const MinIOAlias = "minio"

// StoreBucket is the S3 bucket of the replicas' store; each cluster keeps
// its objects under its own prefix (Cluster.StorePrefix).
const StoreBucket = "seqkeeper"

// labelKey marks every container and network a cluster creates.
const labelKey = "org.seqkeeper.integration"

// Options says what NewCluster starts. The zero value starts nothing but the
// network; every field may be left zero.
type Options struct {
	// ZooKeepers is the ensemble size (1 runs a standalone server). Servers
	// are named zoo1, zoo2, ... on the network.
	ZooKeepers int
	// ZooKeeperTLS makes the servers serve TLS only, on the same client
	// port, require a client certificate from the cluster's CA and know
	// clients by it (x509); replicas get zk_tls_* settings and the
	// identity ReplicaIdentity. Cluster.ZooKeeperTLS is the test's own.
	ZooKeeperTLS bool
	// ZooKeeperEnv is added to each server's environment (the official
	// image's ZOO_* variables), overriding the harness's fast-test defaults.
	ZooKeeperEnv map[string]string
	// MinIO starts a MinIO server named minio on the network.
	MinIO bool
	// Replicas is the number of seqkeeper containers, named seqkeeper1,
	// seqkeeper2, ...; they start after ZooKeeper serves and MinIO is live.
	Replicas int
	// ReplicaArgs is the seqkeeper command line; default ["serve"].
	ReplicaArgs []string
	// ReplicaEnv is added to each replica's environment, overriding the
	// defaults (SEQKEEPER_ZK, SEQKEEPER_STORE, SEQKEEPER_HTTP, AWS_*) that
	// point it at this cluster's servers.
	ReplicaEnv map[string]string
	// ReplicaWait tells when a replica is ready. Default: GET /readyz
	// answers 200 for "serve" (it has a ZooKeeper session), the
	// container has exited for any other command.
	ReplicaWait wait.Strategy
	// StartTimeout bounds the start of each container and the ensemble's
	// quorum; default 2 minutes.
	StartTimeout time.Duration
}

// Cluster is a set of containers on one private Docker network, torn down
// when the test ends.
type Cluster struct {
	// Network is the name of the cluster's Docker network.
	Network string
	// ZooKeepers are the ensemble's servers; ZooKeepers[i] is zoo<i+1>.
	ZooKeepers []*Node
	// MinIO is the MinIO server, or nil.
	MinIO *Node

	t         testing.TB
	opts      Options
	docker    *client.Client
	networkID string
	host      string // where published ports are reached from this process

	subnet netip.Prefix // the network's; every node has a fixed address in it
	zkTLS  *clusterTLS  // Options.ZooKeeperTLS

	mu       sync.Mutex
	lastIP   netip.Addr // the address given last (the gateway before any)
	replicas []*Node
	started  int     // replicas started or starting, for their names
	all      []*Node // every container created, removed by close
	resolver *Node   // answers name lookups for waitResolvable
}

// NewCluster starts the containers opts asks for and returns when all are
// ready: the ensemble has a quorum, MinIO answers its health check and each
// replica passes opts.ReplicaWait. It fails the test (never skips it) when
// Docker is unreachable or an image is missing, naming the image and the
// command that builds it. Everything is removed when the test ends.
func NewCluster(ctx context.Context, t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if len(opts.ReplicaArgs) == 0 {
		opts.ReplicaArgs = []string{"serve"}
	}

	docker, err := client.New(client.FromEnv)
	if err == nil {
		_, err = docker.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	}
	if err != nil {
		t.Fatalf("integration: cannot reach the Docker daemon: %v", err)
	}
	c := &Cluster{t: t, opts: opts, docker: docker}
	t.Cleanup(c.close)
	if opts.ZooKeeperTLS {
		c.zkTLS = newClusterTLS(t, opts.ZooKeepers)
	}

	if err := c.checkImages(ctx); err != nil {
		t.Fatalf("integration: %v", err)
	}

	c.Network = networkName(t)
	gateway, err := c.createNetwork(ctx)
	if err != nil {
		t.Fatalf("integration: %v", err)
	}
	if c.host, err = publishedHost(gateway); err != nil {
		t.Fatalf("integration: %v", err)
	}

	// ZooKeeper servers and MinIO start in parallel: a server waits for its
	// peers' names to resolve anyway.
	servers := make([]*Node, opts.ZooKeepers)
	var wg sync.WaitGroup
	errs := make(chan error, opts.ZooKeepers+2)
	wg.Go(func() {
		n, err := c.startResolver(ctx)
		c.resolver = n
		errs <- err
	})
	for i := range servers {
		wg.Go(func() {
			n, err := c.startZooKeeper(ctx, i+1)
			servers[i] = n
			errs <- err
		})
	}
	if opts.MinIO {
		wg.Go(func() {
			n, err := c.startMinIO(ctx)
			c.MinIO = n
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		t.Fatalf("integration: %v", err)
	}
	c.ZooKeepers = servers
	for _, n := range c.dialled() {
		if err := c.waitResolvable(ctx, n); err != nil {
			t.Fatalf("integration: %v", err)
		}
	}
	if len(servers) > 0 {
		qctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
		defer cancel()
		if err := c.WaitZooKeeperServing(qctx); err != nil {
			t.Fatalf("integration: %v", err)
		}
	}
	for range opts.Replicas {
		if _, err := c.AddReplica(ctx); err != nil {
			t.Fatalf("integration: %v", err)
		}
	}
	return c
}

// Replicas returns the seqkeeper containers in the order they were added.
func (c *Cluster) Replicas() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.replicas...)
}

// ZooKeeperAddrs returns the host addresses (127.0.0.1:port) of the
// ensemble's client ports, for ZooKeeper clients in the test process.
func (c *Cluster) ZooKeeperAddrs() []string {
	addrs := make([]string, len(c.ZooKeepers))
	for i, n := range c.ZooKeepers {
		addrs[i] = n.Addr(ZooKeeperPort)
	}
	return addrs
}

// ZooKeeperConnect returns the ensemble's connect string on the cluster
// network ("zoo1:2181,zoo2:2181,..."), for containers.
func (c *Cluster) ZooKeeperConnect() string {
	addrs := make([]string, len(c.ZooKeepers))
	for i, n := range c.ZooKeepers {
		addrs[i] = n.InternalAddr(ZooKeeperPort)
	}
	return strings.Join(addrs, ",")
}

// MinIOEndpoint returns MinIO's S3 endpoint URL on the host
// (http://127.0.0.1:port), for S3 clients in the test process.
func (c *Cluster) MinIOEndpoint() string {
	return "http://" + c.MinIO.Addr(MinIOPort)
}

// MinIOInternalEndpoint returns MinIO's S3 endpoint URL on the cluster
// network (http://minio:9000), for containers.
func (c *Cluster) MinIOInternalEndpoint() string {
	return "http://" + MinIOAlias + ":" + portNumber(MinIOPort)
}

// StorePrefix returns the key prefix, in StoreBucket, of the replicas'
// store: the cluster network's name.
func (c *Cluster) StorePrefix() string { return c.Network }

// AddReplica starts one more seqkeeper container, seqkeeper<N>, running
// args (Options.ReplicaArgs when none are given) with the cluster's replica
// environment, and returns once it is ready (see Options.ReplicaWait).
func (c *Cluster) AddReplica(ctx context.Context, args ...string) (*Node, error) {
	return c.AddReplicaWith(ctx, args)
}

// AddReplicaWith is AddReplica with more container options (files, env),
// applied after the defaults.
func (c *Cluster) AddReplicaWith(ctx context.Context, args []string, extra ...testcontainers.ContainerCustomizer) (*Node, error) {
	if len(args) == 0 {
		args = c.opts.ReplicaArgs
	}
	c.mu.Lock()
	c.started++
	name := fmt.Sprintf("seqkeeper%d", c.started)
	c.mu.Unlock()

	env := map[string]string{
		"SEQKEEPER_HTTP":        "0.0.0.0:" + portNumber(ReplicaPort),
		"AWS_ACCESS_KEY_ID":     MinIOUser,
		"AWS_SECRET_ACCESS_KEY": MinIOPassword,
	}
	if len(c.ZooKeepers) > 0 {
		env["SEQKEEPER_ZK"] = c.ZooKeeperConnect()
	}
	if c.MinIO != nil {
		env["SEQKEEPER_STORE"] = "s3://" + StoreBucket + "/" + c.StorePrefix() + "?endpoint=" + c.MinIOInternalEndpoint() + "&region=us-east-1"
	}
	if c.zkTLS != nil {
		tlsEnv, files := c.zkTLS.replicaSettings()
		for k, v := range tlsEnv {
			env[k] = v
		}
		extra = append([]testcontainers.ContainerCustomizer{files}, extra...)
	}
	for k, v := range c.opts.ReplicaEnv {
		env[k] = v
	}
	ready := c.opts.ReplicaWait
	if ready == nil {
		if args[0] == "serve" {
			ready = wait.ForHTTP("/readyz").WithPort(ReplicaPort)
		} else {
			ready = wait.ForExit()
		}
	}
	n, err := c.start(ctx, name, SeqkeeperImage, []string{ReplicaPort}, append([]testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(args...),
		testcontainers.WithEnv(env),
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, ready),
	}, extra...)...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.replicas = append(c.replicas, n)
	c.mu.Unlock()
	return n, nil
}

func (c *Cluster) startZooKeeper(ctx context.Context, id int) (*Node, error) {
	servers := make([]string, c.opts.ZooKeepers)
	for i := range servers {
		servers[i] = fmt.Sprintf("server.%d=zoo%d:2888:3888;%s", i+1, i+1, portNumber(ZooKeeperPort))
		if c.zkTLS != nil {
			servers[i] = fmt.Sprintf("server.%d=zoo%d:2888:3888", i+1, i+1) // no plain client port
		}
	}
	env := map[string]string{
		"ZOO_MY_ID":   fmt.Sprint(id),
		"ZOO_SERVERS": strings.Join(servers, " "),
		// A short tick makes leader election, failure detection and session
		// expiry (2 to 20 ticks) take seconds. A follower leaves a leader
		// that sent it nothing for syncLimit ticks, and with it the
		// ensemble elects again (a new epoch: every sequence revalidated,
		// every session disconnected): 5 s, not 2.5 s, which a leader's
		// JVM on a loaded two-core machine outlasted (a fresh-clone run's
		// rolling upgrade, its suite at 97% of both cores, saw both
		// followers time out on a live leader). initLimit likewise.
		"ZOO_TICK_TIME":              "500",
		"ZOO_INIT_LIMIT":             "20",
		"ZOO_SYNC_LIMIT":             "10",
		"ZOO_4LW_COMMANDS_WHITELIST": "srvr,ruok,mntr,stat,conf,cons",
		"ZOO_ADMINSERVER_ENABLED":    "false",
		// A reconnected container may come back with another IP address;
		// the quorum and election ports must not stay bound to the old one.
		// Transaction logs are padded in blocks of preAllocSize KB (64 MB
		// by default, a new log after every restart). In 1 MB blocks a
		// copy of a server's data (SnapshotZooKeeperData, written back
		// into every server) is its data, not 64 MB of zeros per log,
		// whose disk writes would stall the cluster beside it.
		"ZOO_CFG_EXTRA": "quorumListenOnAllIPs=true preAllocSize=1024",
		// A server alone doubles its leader election notification interval
		// up to this cap (default 60 s), and so would take up to a minute
		// to rejoin after a partition heals.
		"JVMFLAGS": "-Xmx256m -Dzookeeper.fastleader.maxNotificationInterval=1000",
	}
	var extra []testcontainers.ContainerCustomizer
	if c.zkTLS != nil {
		cfg, files := c.zkTLS.zooKeeperSettings()
		env["ZOO_CFG_EXTRA"] += " " + cfg
		extra = append(extra, files)
	}
	for k, v := range c.opts.ZooKeeperEnv {
		env[k] = v
	}
	return c.start(ctx, fmt.Sprintf("zoo%d", id), ZooKeeperImage, []string{ZooKeeperPort}, append(extra,
		testcontainers.WithEnv(env),
		// The server binds its client port before it looks for a quorum;
		// NewCluster and tests wait for the quorum with WaitZooKeeperServing.
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, logSinceStart(c.docker, `binding to port .*:2181`)),
	)...)
}

func (c *Cluster) startMinIO(ctx context.Context) (*Node, error) {
	return c.start(ctx, MinIOAlias, MinIOImage, []string{MinIOPort},
		testcontainers.WithCmd("server", "/data"),
		testcontainers.WithEnv(map[string]string{"MINIO_ROOT_USER": MinIOUser, "MINIO_ROOT_PASSWORD": MinIOPassword}),
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, wait.ForHTTP("/minio/health/live").WithPort(MinIOPort)),
	)
}

// close removes every container and the network; on failure it first logs
// the tail of each container's output.
func (c *Cluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.mu.Lock()
	nodes := append([]*Node(nil), c.all...)
	c.mu.Unlock()
	if c.t.Failed() {
		for _, n := range nodes {
			c.t.Logf("integration: last output of %s:%s", n.Name, n.logTail(ctx, 40))
		}
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			// No grace period: the data goes with the container.
			if err := n.Container.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
				c.t.Logf("integration: remove %s: %v", n.Name, err)
			}
		})
	}
	wg.Wait()
	if c.networkID != "" {
		if _, err := c.docker.NetworkRemove(ctx, c.networkID, client.NetworkRemoveOptions{}); err != nil {
			c.t.Logf("integration: remove network %s: %v", c.Network, err)
		}
	}
	if err := c.docker.Close(); err != nil {
		c.t.Logf("integration: close Docker client: %v", err)
	}
}

// WriteLogs writes every container's whole output to dir/<name>.log.
func (c *Cluster) WriteLogs(ctx context.Context, dir string) error {
	c.mu.Lock()
	nodes := append([]*Node(nil), c.all...)
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		out, err := n.Logs(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, n.Name+".log"), []byte(out), 0o644)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func collect(errs <-chan error) []error {
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return all
}
