// Package integration runs seqkeeper against real servers in containers: a
// ZooKeeper ensemble, MinIO and seqkeeper replicas, each its own host on a
// private Docker network, so that tests can stop, kill, pause and partition
// them one by one.
//
// The images are built locally by scripts/images.sh (no registry is needed
// or used); NewCluster fails the test, naming the missing image, when one is
// absent. Set TESTCONTAINERS_RYUK_DISABLED=true (TestMain does) since the
// Ryuk reaper image cannot be pulled either. Published ports are reached at
// 127.0.0.1 when the Docker daemon shares this network namespace, even in a
// container (see publishedHost); TESTCONTAINERS_HOST_OVERRIDE overrides
// that. Containers and networks carry
// the label org.seqkeeper.integration, so anything a killed test run leaves
// behind can be removed with
//
//	docker rm -f $(docker ps -aq --filter label=org.seqkeeper.integration)
//	docker network prune --filter label=org.seqkeeper.integration
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
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
	// answers 200 for "serve" (ZooKeeper session and store are up), the
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

	mu       sync.Mutex
	lastIP   netip.Addr // the address given last (the gateway before any)
	replicas []*Node
	started  int     // replicas started or starting, for their names
	all      []*Node // every container created, removed by close
}

// Node is one container of a cluster. Its methods take the context first;
// cancelling it abandons the call, not the container.
type Node struct {
	// Name is the container's host name on the cluster network
	// (zoo1, minio, seqkeeper1, ...).
	Name string
	// Container is the underlying testcontainers handle.
	Container *testcontainers.DockerContainer

	cluster *Cluster
	ports   []string

	mu    sync.Mutex
	addrs map[string]string // container port -> host address, while running
	ip    netip.Addr        // on the cluster network, kept by Reconnect
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
	errs := make(chan error, opts.ZooKeepers+1)
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

// WaitZooKeeperServing returns once every given server (all of them when
// none is given) serves clients, that is answers srvr as leader, follower
// or standalone, or with the last error when ctx ends.
func (c *Cluster) WaitZooKeeperServing(ctx context.Context, servers ...*Node) error {
	if len(servers) == 0 {
		servers = c.ZooKeepers
	}
	for _, n := range servers {
		for {
			_, err := n.ZooKeeperMode(ctx)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not serving: %w (%w)", n.Name, err, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// AddReplica starts one more seqkeeper container, seqkeeper<N>, running
// args (Options.ReplicaArgs when none are given) with the cluster's replica
// environment, and returns once it is ready (see Options.ReplicaWait).
func (c *Cluster) AddReplica(ctx context.Context, args ...string) (*Node, error) {
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
	n, err := c.start(ctx, name, SeqkeeperImage, []string{ReplicaPort},
		testcontainers.WithCmd(args...),
		testcontainers.WithEnv(env),
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, ready),
	)
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
	}
	env := map[string]string{
		"ZOO_MY_ID":   fmt.Sprint(id),
		"ZOO_SERVERS": strings.Join(servers, " "),
		// A short tick makes leader election, failure detection and session
		// expiry (2 to 20 ticks) take seconds.
		"ZOO_TICK_TIME":              "500",
		"ZOO_INIT_LIMIT":             "10",
		"ZOO_SYNC_LIMIT":             "5",
		"ZOO_4LW_COMMANDS_WHITELIST": "srvr,ruok,mntr,stat,conf,cons",
		"ZOO_ADMINSERVER_ENABLED":    "false",
		// A reconnected container may come back with another IP address;
		// the quorum and election ports must not stay bound to the old one.
		"ZOO_CFG_EXTRA": "quorumListenOnAllIPs=true",
		// A server alone doubles its leader election notification interval
		// up to this cap (default 60 s), and so would take up to a minute
		// to rejoin after a partition heals.
		"JVMFLAGS": "-Xmx256m -Dzookeeper.fastleader.maxNotificationInterval=1000",
	}
	for k, v := range c.opts.ZooKeeperEnv {
		env[k] = v
	}
	return c.start(ctx, fmt.Sprintf("zoo%d", id), ZooKeeperImage, []string{ZooKeeperPort},
		testcontainers.WithEnv(env),
		// The server binds its client port before it looks for a quorum;
		// NewCluster and tests wait for the quorum with WaitZooKeeperServing.
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, logSinceStart(c.docker, `binding to port .*:2181`)),
	)
}

func (c *Cluster) startMinIO(ctx context.Context) (*Node, error) {
	return c.start(ctx, MinIOAlias, MinIOImage, []string{MinIOPort},
		testcontainers.WithCmd("server", "/data"),
		testcontainers.WithEnv(map[string]string{"MINIO_ROOT_USER": MinIOUser, "MINIO_ROOT_PASSWORD": MinIOPassword}),
		testcontainers.WithWaitStrategyAndDeadline(c.opts.StartTimeout, wait.ForHTTP("/minio/health/live").WithPort(MinIOPort)),
	)
}

// start runs one container on the cluster network under the alias name.
//
// Its ports are published on host ports chosen here, below the ephemeral
// range, and kept across restarts. Docker's own choice would come from the
// ephemeral range, and a restarted container asks for its old port again:
// once one of this process's outgoing connections holds that port (the
// workers open many), the container could not start again ("address
// already in use", seen in a mixed chaos run).
func (c *Cluster) start(ctx context.Context, name, image string, ports []string, opts ...testcontainers.ContainerCustomizer) (*Node, error) {
	bindings := make(network.PortMap, len(ports))
	for _, p := range ports {
		hostPort, err := testenv.FreePort()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		port, err := network.ParsePort(p)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		bindings[port] = []network.PortBinding{{HostPort: strconv.Itoa(hostPort)}}
	}
	ip, err := c.nextIP()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	opts = append([]testcontainers.ContainerCustomizer{
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.PortBindings = bindings }),
		testcontainers.WithLogger(tclog.TestLogger(c.t)),
		testcontainers.WithName(c.Network + "-" + name),
		testcontainers.WithExposedPorts(ports...),
		testcontainers.WithLabels(map[string]string{labelKey: c.t.Name()}),
		// The host name is what a node calls itself (seqkeeper's replica id).
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.Hostname = name }),
		testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			req.Networks = []string{c.Network}
			req.NetworkAliases = map[string][]string{c.Network: {name}}
			req.EndpointSettingsModifier = func(eps map[string]*network.EndpointSettings) {
				if ep := eps[c.Network]; ep != nil {
					ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
				}
			}
			return nil
		}),
	}, opts...)
	ctr, err := testcontainers.Run(ctx, image, opts...)
	n := &Node{Name: name, Container: ctr, cluster: c, ports: ports}
	if ctr != nil {
		c.mu.Lock()
		c.all = append(c.all, n)
		c.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("start %s (%s): %w%s", name, image, err, n.logTail(ctx, 30))
	}
	if err := n.refreshAddrs(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// nextIP returns the next address of the cluster network for a new node.
func (c *Cluster) nextIP() (netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ip := c.lastIP.Next()
	if !ip.IsValid() || !c.subnet.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("no address left in %s", c.subnet)
	}
	c.lastIP = ip
	return ip, nil
}

// checkImages fails unless all three images exist locally: nothing is
// pulled, and a missing image must not surface as a pull error minutes in.
func (c *Cluster) checkImages(ctx context.Context) error {
	var missing []string
	for _, image := range []string{ZooKeeperImage, MinIOImage, SeqkeeperImage} {
		_, err := c.docker.ImageInspect(ctx, image)
		switch {
		case cerrdefs.IsNotFound(err):
			missing = append(missing, image)
		case err != nil:
			return fmt.Errorf("inspect image %s: %w", image, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing Docker image(s) %s; build them from the repository root with: bash scripts/images.sh",
			strings.Join(missing, ", "))
	}
	return nil
}

// createNetwork creates the cluster network and returns its gateway.
//
// The network gets an explicit subnet, the one Docker picks for it, and
// every node a fixed address in it (nextIP): a node keeps its address
// across restarts and partitions. It must: a ZooKeeper server resolves its
// peers' names once and keeps dialling the old address of a peer that came
// back with a new one. And no address is ever handed out dynamically,
// which could give a stopped node's address to another node, so that the
// stopped one could not start again ("address already in use", seen in a
// mixed chaos run after a partition and a restart of every replica).
func (c *Cluster) createNetwork(ctx context.Context) (netip.Addr, error) {
	opts := client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: map[string]string{labelKey: c.t.Name()},
	}
	var err error
	for range 3 {
		var res client.NetworkCreateResult
		if res, err = c.docker.NetworkCreate(ctx, c.Network, opts); err != nil {
			return netip.Addr{}, fmt.Errorf("create network %s: %w", c.Network, err)
		}
		var info client.NetworkInspectResult
		info, err = c.docker.NetworkInspect(ctx, res.ID, client.NetworkInspectOptions{})
		if err == nil && len(info.Network.IPAM.Config) == 0 {
			err = errors.New("no IPAM configuration")
		}
		if err != nil {
			_, _ = c.docker.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{})
			return netip.Addr{}, fmt.Errorf("inspect network %s: %w", c.Network, err)
		}
		if _, err = c.docker.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); err != nil {
			return netip.Addr{}, fmt.Errorf("recreate network %s: %w", c.Network, err)
		}
		cfg := info.Network.IPAM.Config[0]
		fixed := opts
		fixed.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: cfg.Subnet, Gateway: cfg.Gateway}}}
		if res, err = c.docker.NetworkCreate(ctx, c.Network, fixed); err == nil {
			c.networkID, c.subnet, c.lastIP = res.ID, cfg.Subnet, cfg.Gateway
			return cfg.Gateway, nil
		}
		// Another network took the subnet in between: start over.
	}
	return netip.Addr{}, fmt.Errorf("create network %s with a fixed subnet: %w", c.Network, err)
}

// hostOverride is decided once per process: testcontainers reads its
// configuration once.
var hostOverride struct {
	once sync.Once
	host string
}

// publishedHost returns the address at which this process reaches the ports
// Docker publishes: 127.0.0.1 when the daemon's bridges, such as the one
// with this gateway, are interfaces of this network namespace, whatever
// testcontainers guesses. It guesses the default gateway whenever
// /.dockerenv exists, which is wrong when the daemon runs in the same
// container (Docker in Docker); it is right when the socket of a daemon
// outside is mounted in, and then "" is returned to keep its guess. The
// answer is handed to testcontainers (its own wait strategies dial the host
// too) through TESTCONTAINERS_HOST_OVERRIDE unless that is set already.
func publishedHost(gateway netip.Addr) (string, error) {
	if h := os.Getenv("TESTCONTAINERS_HOST_OVERRIDE"); h != "" {
		return h, nil
	}
	local, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list network interfaces: %w", err)
	}
	hostOverride.once.Do(func() {
		for _, a := range local {
			if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.Equal(net.IP(gateway.AsSlice())) {
				hostOverride.host = "127.0.0.1"
				os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", hostOverride.host)
				return
			}
		}
	})
	return hostOverride.host, nil
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

// Addr returns the host address (127.0.0.1:port) that reaches the
// container port (for example ZooKeeperPort), as of the node's last start
// or reconnect; "" when the port is not mapped.
func (n *Node) Addr(port string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[port]
}

// InternalAddr returns the node's address on the cluster network
// (name:port) for a container port such as ZooKeeperPort.
func (n *Node) InternalAddr(port string) string {
	return n.Name + ":" + portNumber(port)
}

// Stop stops the container gracefully: SIGTERM, then SIGKILL if it is still
// running after 10 seconds. It returns once the container has stopped.
func (n *Node) Stop(ctx context.Context) error {
	timeout := 10 * time.Second
	if err := n.Container.Stop(ctx, &timeout); err != nil {
		return fmt.Errorf("stop %s: %w", n.Name, err)
	}
	return nil
}

// Kill sends SIGKILL and returns once the container has stopped.
func (n *Node) Kill(ctx context.Context) error {
	if _, err := n.cluster.docker.ContainerKill(ctx, n.Container.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", n.Name, err)
	}
	for {
		state, err := n.Container.State(ctx)
		if err != nil {
			return fmt.Errorf("kill %s: %w", n.Name, err)
		}
		if !state.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill %s: still running: %w", n.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DumpGoroutines makes a seqkeeper replica print every goroutine's stack
// (SIGQUIT; the Go runtime then exits with status 2) and returns the tail of
// its output: what a hang was blocked on. The container is stopped
// afterwards; Start brings it back.
func (n *Node) DumpGoroutines(ctx context.Context) string {
	if _, err := n.cluster.docker.ContainerKill(ctx, n.Container.GetContainerID(), client.ContainerKillOptions{Signal: "QUIT"}); err != nil {
		return fmt.Sprintf("(SIGQUIT %s: %v)", n.Name, err)
	}
	for range 100 {
		state, err := n.Container.State(ctx)
		if err != nil || !state.Running {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n.logTail(ctx, 2000)
}

// Start starts a stopped or killed container again, keeping its file
// system, its address and its host ports, and returns once it passes its
// readiness check again.
func (n *Node) Start(ctx context.Context) error {
	if err := n.Container.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w%s", n.Name, err, n.logTail(ctx, 30))
	}
	return n.refreshAddrs(ctx)
}

// Pause freezes every process of the container (SIGSTOP-like, through the
// cgroup freezer): connections stay open but nothing answers.
func (n *Node) Pause(ctx context.Context) error {
	if _, err := n.cluster.docker.ContainerPause(ctx, n.Container.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", n.Name, err)
	}
	return nil
}

// Unpause resumes a paused container.
func (n *Node) Unpause(ctx context.Context) error {
	if _, err := n.cluster.docker.ContainerUnpause(ctx, n.Container.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("unpause %s: %w", n.Name, err)
	}
	return nil
}

// Disconnect cuts the node off the cluster network: it can reach no other
// node and, having no other network, the test process cannot reach it
// either. Its processes keep running.
func (n *Node) Disconnect(ctx context.Context) error {
	info, err := n.Container.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("disconnect %s: %w", n.Name, err)
	}
	ep := info.NetworkSettings.Networks[n.cluster.Network]
	if ep == nil {
		return fmt.Errorf("disconnect %s: not on network %s", n.Name, n.cluster.Network)
	}
	_, err = n.cluster.docker.NetworkDisconnect(ctx, n.cluster.networkID, client.NetworkDisconnectOptions{
		Container: n.Container.GetContainerID(),
	})
	if err != nil {
		return fmt.Errorf("disconnect %s from %s: %w", n.Name, n.cluster.Network, err)
	}
	n.mu.Lock()
	n.ip = ep.IPAddress
	n.mu.Unlock()
	return nil
}

// Reconnect joins a disconnected node to the cluster network again under
// its name and its old IP address, as a healed partition would.
func (n *Node) Reconnect(ctx context.Context) error {
	n.mu.Lock()
	ip := n.ip
	n.mu.Unlock()
	ep := &network.EndpointSettings{Aliases: []string{n.Name}}
	if ip.IsValid() {
		ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
	}
	_, err := n.cluster.docker.NetworkConnect(ctx, n.cluster.networkID, client.NetworkConnectOptions{
		Container:      n.Container.GetContainerID(),
		EndpointConfig: ep,
	})
	if err != nil {
		return fmt.Errorf("reconnect %s to %s: %w", n.Name, n.cluster.Network, err)
	}
	return n.refreshAddrs(ctx)
}

// Logs returns everything the container wrote to stdout and stderr, over
// all its runs.
func (n *Node) Logs(ctx context.Context) (string, error) {
	rc, err := n.Container.Logs(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", n.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", n.Name, err)
	}
	return string(b), nil
}

// ZooKeeperMode asks a ZooKeeper node, through its host port, for its role
// with the srvr command: "leader", "follower" or "standalone". A server that
// is up but has no quorum answers with an error.
func (n *Node) ZooKeeperMode(ctx context.Context) (string, error) {
	mode, _, err := n.zooKeeperSrvr(ctx)
	return mode, err
}

// ZooKeeperZxid asks a serving ZooKeeper node (srvr) for the last zxid it
// processed. Its high 32 bits are the ensemble's epoch: after a leader
// election the leader's zxid is the new epoch's first.
func (n *Node) ZooKeeperZxid(ctx context.Context) (int64, error) {
	_, zxid, err := n.zooKeeperSrvr(ctx)
	if err == nil && zxid < 0 {
		err = fmt.Errorf("%s: srvr: no zxid in the answer", n.Name)
	}
	return zxid, err
}

// zooKeeperSrvr sends srvr and returns the mode and the zxid it reports
// (-1 when it reports none).
func (n *Node) zooKeeperSrvr(ctx context.Context) (string, int64, error) {
	addr := n.Addr(ZooKeeperPort)
	if addr == "" {
		return "", 0, fmt.Errorf("%s: no host port for %s", n.Name, ZooKeeperPort)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s: srvr: %w", n.Name, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", 0, fmt.Errorf("%s: srvr: %w", n.Name, err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		return "", 0, fmt.Errorf("%s: srvr: %w", n.Name, err)
	}
	var zxid int64 = -1
	sc := bufio.NewScanner(bytes.NewReader(reply))
	for sc.Scan() {
		if hex, ok := strings.CutPrefix(sc.Text(), "Zxid: 0x"); ok {
			if v, err := strconv.ParseInt(strings.TrimSpace(hex), 16, 64); err == nil {
				zxid = v
			}
		}
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return mode, zxid, nil
		}
	}
	if len(reply) == 0 {
		// docker-proxy accepts and closes when nothing listens inside.
		return "", 0, fmt.Errorf("%s: srvr: no answer", n.Name)
	}
	return "", 0, fmt.Errorf("%s: srvr: %s", n.Name, strings.TrimSpace(string(reply)))
}

// refreshAddrs reads the host ports Docker mapped for the node's ports.
func (n *Node) refreshAddrs(ctx context.Context) error {
	host := n.cluster.host
	if host == "" {
		var err error
		if host, err = n.Container.Host(ctx); err != nil {
			return fmt.Errorf("%s: docker host: %w", n.Name, err)
		}
	}
	addrs := make(map[string]string, len(n.ports))
	for _, p := range n.ports {
		// A container that has exited (a one-shot command) has no ports.
		if mapped, err := n.Container.MappedPort(ctx, p); err == nil {
			addrs[p] = net.JoinHostPort(host, mapped.Port())
		}
	}
	n.mu.Lock()
	n.addrs = addrs
	n.mu.Unlock()
	return nil
}

// logTail returns the last lines of the node's output, for error messages.
func (n *Node) logTail(ctx context.Context, lines int) string {
	if n.Container == nil {
		return ""
	}
	out, err := n.Logs(ctx)
	if err != nil {
		return "\n(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "\n\t" + strings.Join(all, "\n\t")
}

// logSinceStart waits for a line matching pattern in the output of the
// container's current run: after a restart the previous runs' lines, still
// in `docker logs`, must not count.
func logSinceStart(docker client.APIClient, pattern string) wait.Strategy {
	return &logStrategy{docker: docker, re: regexp.MustCompile(pattern)}
}

type logStrategy struct {
	docker client.APIClient
	re     *regexp.Regexp
}

func (s *logStrategy) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	for {
		found, err := s.match(ctx, target)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no log line matching %q since the container started: %w", s.re, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *logStrategy) match(ctx context.Context, target wait.StrategyTarget) (bool, error) {
	info, err := target.Inspect(ctx)
	if err != nil {
		return false, err
	}
	if !info.State.Running {
		return false, fmt.Errorf("container exited (code %d) before logging %q", info.State.ExitCode, s.re)
	}
	started, err := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	if err != nil {
		return false, fmt.Errorf("container start time %q: %w", info.State.StartedAt, err)
	}
	rc, err := s.docker.ContainerLogs(ctx, info.ID, client.ContainerLogsOptions{
		ShowStdout: true,
		ShowStderr: true,
		Since:      fmt.Sprintf("%d.%09d", started.Unix(), started.Nanosecond()),
	})
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return false, err
	}
	return s.re.Match(out.Bytes()), nil
}

// networkName returns a name unique to this test and run.
func networkName(t testing.TB) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, t.Name())
	if len(clean) > 30 {
		clean = clean[:30]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "seqkeeper-" + strings.Trim(clean, "-") + "-" + hex.EncodeToString(b[:])
}

// portNumber turns "2181/tcp" into "2181".
func portNumber(port string) string {
	num, _, _ := strings.Cut(port, "/")
	return num
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
