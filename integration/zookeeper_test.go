package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

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
	out, err := zkclient.FourLetterWordTLS(ctx, addr, "srvr", n.cluster.ZooKeeperTLS())
	if err != nil {
		// docker-proxy accepts and closes when nothing listens inside.
		return "", 0, fmt.Errorf("%s: srvr: no answer: %w", n.Name, err)
	}
	reply := []byte(out)
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
	return "", 0, fmt.Errorf("%s: srvr: %s", n.Name, strings.TrimSpace(string(reply)))
}

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
		n.cluster.t.Logf("%s: copied %s/version-2: %d bytes", n.Name, dir, len(b))
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
