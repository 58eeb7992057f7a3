package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// ZooKeeper's data directories in the image (ZOO_DATA_DIR, ZOO_DATA_LOG_DIR),
// both volumes. Everything ZooKeeper keeps lies in their version-2
// subdirectories; myid, next to it, is the server's identity and stays.
var zooKeeperDataDirs = []string{"/data", "/datalog"}

// ZooKeeperData is a copy of one server's data: its snapshots, transaction
// logs and epoch files, without its myid.
type ZooKeeperData struct {
	// From names the server copied.
	From string
	// Tars holds, per data directory, a tar of its version-2 directory.
	Tars map[string][]byte
}

// SnapshotZooKeeperData copies the data of a stopped ZooKeeper server out
// of its volumes, for RestoreZooKeeperData.
func (n *Node) SnapshotZooKeeperData(ctx context.Context) (ZooKeeperData, error) {
	d := ZooKeeperData{From: n.Name, Tars: map[string][]byte{}}
	for _, dir := range zooKeeperDataDirs {
		res, err := n.cluster.docker.CopyFromContainer(ctx, n.Container.GetContainerID(), client.CopyFromContainerOptions{SourcePath: dir + "/version-2"})
		if err != nil {
			return d, fmt.Errorf("snapshot %s:%s: %w", n.Name, dir, err)
		}
		b, err := io.ReadAll(res.Content)
		res.Content.Close()
		if err != nil {
			return d, fmt.Errorf("snapshot %s:%s: %w", n.Name, dir, err)
		}
		d.Tars[dir] = b
	}
	return d, nil
}

// WipeZooKeeperData deletes everything a stopped ZooKeeper server stored,
// keeping its myid: started again, it is an empty server that must be
// given its data by its peers, or start a new ensemble with them.
func (n *Node) WipeZooKeeperData(ctx context.Context) error {
	return n.runOnVolumes(ctx, "rm -rf /data/version-2 /datalog/version-2")
}

// RestoreZooKeeperData replaces the data of a stopped ZooKeeper server
// with d, which may come from another server of the ensemble: the server
// starts with that older state, as after a restore from a backup.
func (n *Node) RestoreZooKeeperData(ctx context.Context, d ZooKeeperData) error {
	if err := n.WipeZooKeeperData(ctx); err != nil {
		return err
	}
	for _, dir := range zooKeeperDataDirs {
		_, err := n.cluster.docker.CopyToContainer(ctx, n.Container.GetContainerID(), client.CopyToContainerOptions{
			DestinationPath: dir,
			Content:         bytes.NewReader(d.Tars[dir]),
			CopyUIDGID:      true,
		})
		if err != nil {
			return fmt.Errorf("restore %s:%s from %s: %w", n.Name, dir, d.From, err)
		}
	}
	return nil
}

// runOnVolumes runs a shell command in a throwaway container of the
// node's image that mounts the node's volumes, and fails unless it exits 0.
// The node should be stopped.
func (n *Node) runOnVolumes(ctx context.Context, script string) error {
	docker := n.cluster.docker
	info, err := n.Container.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	created, err := docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      info.Config.Image,
			Entrypoint: []string{"/bin/sh", "-c", script},
			Labels:     map[string]string{labelKey: n.cluster.t.Name()},
		},
		HostConfig: &container.HostConfig{VolumesFrom: []string{n.Container.GetContainerID()}},
	})
	if err != nil {
		return fmt.Errorf("%s: helper container: %w", n.Name, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = docker.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	if _, err := docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("%s: start helper container: %w", n.Name, err)
	}
	res := docker.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case w := <-res.Result:
		if w.StatusCode != 0 {
			return fmt.Errorf("%s: %q exited %d", n.Name, script, w.StatusCode)
		}
		return nil
	case err := <-res.Error:
		return fmt.Errorf("%s: wait for helper container: %w", n.Name, err)
	}
}

// ZooKeeperLeader returns the server that currently leads the ensemble, and
// the others.
func (c *Cluster) ZooKeeperLeader(ctx context.Context) (leader *Node, followers []*Node, err error) {
	for _, n := range c.ZooKeepers {
		mode, err := n.ZooKeeperMode(ctx)
		if err == nil && mode == "leader" {
			leader = n
		} else {
			followers = append(followers, n)
		}
	}
	if leader == nil {
		return nil, nil, errors.New("no ZooKeeper server says it leads")
	}
	return leader, followers, nil
}

// ZooKeeperProxy gives clients in the test process stable addresses for
// the ensemble's servers: a server's host port changes whenever its
// container starts again, and a ZooKeeper client keeps the addresses it
// was given. Each proxy listens on its own local port and forwards every
// new connection to the server's current host port.
type ZooKeeperProxy struct {
	addrs []string
	lns   []net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
	wg    sync.WaitGroup
}

// NewZooKeeperProxy starts a proxy per ZooKeeper server of c, closed when
// the test ends.
func NewZooKeeperProxy(t testing.TB, c *Cluster) *ZooKeeperProxy {
	t.Helper()
	p := &ZooKeeperProxy{conns: map[net.Conn]bool{}}
	t.Cleanup(p.Close)
	for _, n := range c.ZooKeepers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("zookeeper proxy: %v", err)
		}
		p.lns = append(p.lns, ln)
		p.addrs = append(p.addrs, ln.Addr().String())
		p.wg.Go(func() { p.serve(ln, n) })
	}
	return p
}

// Addrs returns the proxies' addresses, one per server, in order.
func (p *ZooKeeperProxy) Addrs() []string { return append([]string(nil), p.addrs...) }

// Close stops the proxies and closes every proxied connection.
func (p *ZooKeeperProxy) Close() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *ZooKeeperProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.done {
			return false
		}
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *ZooKeeperProxy) serve(ln net.Listener, n *Node) {
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(down, n) })
	}
}

func (p *ZooKeeperProxy) forward(down net.Conn, n *Node) {
	defer down.Close()
	addr := n.Addr(ZooKeeperPort)
	if addr == "" {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(down, true) {
		return
	}
	defer p.track(down, false)
	if !p.track(up, true) {
		return
	}
	defer p.track(up, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	// One direction ended: end both, as a dropped connection would.
	up.Close()
	down.Close()
	<-done
}
