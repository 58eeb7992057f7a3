package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

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
	if err := n.refreshAddrs(ctx); err != nil {
		return err
	}
	return n.cluster.waitResolvable(ctx, n)
}

// Pause freezes every process of the container (SIGSTOP-like, through the
// cgroup freezer): connections stay open but nothing answers.
//
// runc gives up on a freeze that a process of the container does not
// reach in time ("unable to freeze"), then thaws it, and the container
// runs on as before: a process waiting on the storage driver
// (fuse-overlayfs here) cannot be frozen until its request returns. A
// fresh-clone run met it once, pausing MinIO under the suite's load. Such
// a refusal changed nothing, so it is asked again, up to five times.
func (n *Node) Pause(ctx context.Context) error {
	var err error
	for range 5 {
		_, err = n.cluster.docker.ContainerPause(ctx, n.Container.GetContainerID(), client.ContainerPauseOptions{})
		if err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if err != nil {
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
	if err := n.refreshAddrs(ctx); err != nil {
		return err
	}
	return n.cluster.waitResolvable(ctx, n)
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
