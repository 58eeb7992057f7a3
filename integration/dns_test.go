package integration

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// resolveTimeout bounds how long waitResolvable waits for Docker's DNS.
const resolveTimeout = 30 * time.Second

// startResolver starts the cluster's resolver: a container on the cluster
// network that only answers name lookups for waitResolvable (the
// ZooKeeper image, which has getent, running sleep). It is never faulted,
// so its lookups see what any new container on the network would.
func (c *Cluster) startResolver(ctx context.Context) (*Node, error) {
	return c.start(ctx, "resolver", ZooKeeperImage, nil,
		testcontainers.WithConfigModifier(func(cfg *container.Config) {
			cfg.Entrypoint = []string{"sleep", "infinity"}
			cfg.Cmd = nil
		}),
	)
}

// waitResolvable returns once Docker's DNS on the cluster network answers
// the name of n, if other containers dial n by name (dialled), with n's
// address, as seen from the resolver.
//
// Docker adds a container's name to the network's DNS records from a
// goroutine of its own (libnetwork's watchSvcRecord), after the container
// has started: a node can be ready, its ports answering on the host,
// while a new container on the network still gets "no such host" for its
// name. seqkeeper's replicas wait for ZooKeeper names to resolve, but a
// replica whose store endpoint does not resolve exits at once, and older
// releases, which the upgrade tests start, wait for neither. So NewCluster,
// Node.Start and Node.Reconnect wait for the dialled nodes.
func (c *Cluster) waitResolvable(ctx context.Context, n *Node) error {
	if !slices.Contains(c.dialled(), n) {
		return nil
	}
	n.mu.Lock()
	want := n.ip.String()
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	for {
		addr, err := c.lookup(ctx, n.Name)
		if err == nil && addr == want {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("answered %s", addr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: Docker's DNS on network %s does not resolve it to %s after %v: %w",
				n.Name, c.Network, want, resolveTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialled returns the nodes that other containers dial by name: the
// ZooKeeper servers and MinIO.
func (c *Cluster) dialled() []*Node {
	nodes := slices.Clone(c.ZooKeepers)
	if c.MinIO != nil {
		nodes = append(nodes, c.MinIO)
	}
	return nodes
}

// lookup runs getent hosts name in the resolver and returns the address it
// answers; a name with no record is an error.
func (c *Cluster) lookup(ctx context.Context, name string) (string, error) {
	code, rd, err := c.resolver.Container.Exec(ctx, []string{"getent", "hosts", name}, tcexec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("getent hosts %s: %w", name, err)
	}
	out, err := io.ReadAll(rd)
	if err != nil {
		return "", fmt.Errorf("getent hosts %s: %w", name, err)
	}
	fields := strings.Fields(string(out)) // "address  name"
	if code != 0 || len(fields) == 0 {
		return "", fmt.Errorf("getent hosts %s: exit status %d (no record)", name, code)
	}
	return fields[0], nil
}
