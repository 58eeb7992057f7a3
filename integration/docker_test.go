package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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

// start runs one container on the cluster network under the alias name.
//
// Its ports are published on host ports chosen here, below the ephemeral
// range, and kept across restarts. Docker's own choice would come from the
// ephemeral range, and a restarted container asks for its old port again:
// once one of this process's outgoing connections holds that port (the
// workers open many), the container could not start again ("address
// already in use").
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
	n := &Node{Name: name, Container: ctr, cluster: c, ports: ports, ip: ip}
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
// stopped one could not start again ("address already in use", as after
// a partition and a restart of every replica).
//
// Clusters of tests that run side by side create their networks one at a
// time (networkMu): between the removal and the re-creation another
// cluster's network would get the subnet Docker picked for this one.
func (c *Cluster) createNetwork(ctx context.Context) (netip.Addr, error) {
	networkMu.Lock()
	defer networkMu.Unlock()
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

// networkMu serialises createNetwork across the clusters of this process.
var networkMu sync.Mutex

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
