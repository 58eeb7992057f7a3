package integration

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fault scenarios of the ZooKeeper ensemble: a lost server, a lost quorum,
// a wiped ensemble and rollbacks of every server to older data. See
// docs/guarantees.md.

// loseZooKeeper kills the ensemble's leader until the other two have
// elected a new leader (at most a minute): a new ZooKeeper epoch begins,
// and the primary must revalidate every sequence. Then the killed server
// starts again.
func (ch *chaos) loseZooKeeper(ctx context.Context) error {
	leader, _, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return err
	}
	if err := leader.Kill(ctx); err != nil {
		return err
	}
	killed := time.Now()
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	for {
		var next *Node
		if next, _, err = ch.c.ZooKeeperLeader(lctx); err == nil {
			ch.hist.Event("note", next.Name, fmt.Sprintf("leads the ensemble, %.1fs after %s was killed", time.Since(killed).Seconds(), leader.Name))
			break
		}
		if lctx.Err() != nil {
			err = fmt.Errorf("no new ZooKeeper leader a minute after %s was killed: %w", leader.Name, err)
			break
		}
		sleep(lctx, 250*time.Millisecond)
	}
	cancel()
	return errors.Join(err, ch.startZooKeepers(ctx, leader))
}

// loseQuorum kills the leader and a follower for 15 s: nothing can be
// written, then the ensemble comes back in a new epoch.
func (ch *chaos) loseQuorum(ctx context.Context) error {
	leader, followers, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return err
	}
	down := []*Node{leader, followers[0]}
	if err := parallel(down, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	sleep(ctx, 15*time.Second)
	return ch.startZooKeepers(ctx, down...)
}

// wipeZooKeeper kills the whole ensemble, deletes every server's data and
// starts it empty: the primary must restore every sequence from the store.
func (ch *chaos) wipeZooKeeper(ctx context.Context) error {
	zks := ch.c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	if err := parallel(zks, func(n *Node) error { return n.WipeZooKeeperData(ctx) }); err != nil {
		return err
	}
	return ch.startZooKeepers(ctx, zks...)
}

// rollbackBeforeRaise copies a follower's data, lets traffic go by until
// the primary has stored a raise of every sequence the workers take from
// (at least 3 s, at most 15 s), then rolls the whole ensemble back to the
// copy.
func (ch *chaos) rollbackBeforeRaise(ctx context.Context) error {
	snap, err := ch.snapshotFollower(ctx)
	if err != nil {
		return err
	}
	copied := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	before, after, err := ch.w.WaitRaised(rctx, chaosSequences)
	cancel()
	if err != nil {
		ch.hist.Event("note", "zookeeper", fmt.Sprintf("rolling back 15 s after the copy: %v", err))
	} else {
		ch.hist.Event("note", "zookeeper", fmt.Sprintf("raised since the copy: %v -> %v", before, after))
	}
	sleep(ctx, time.Until(copied.Add(3*time.Second)))
	return ch.restoreEnsemble(ctx, snap)
}

// rollbackAfterRaise is the rollback the versions cannot see: with no
// primary running (so no raise after the copy), a follower's data is
// copied, clients keep taking IDs from the reserve for 3 s, and the ensemble
// is rolled back to the copy. Only the ZooKeeper epoch tells.
func (ch *chaos) rollbackAfterRaise(ctx context.Context) error {
	replicas := ch.c.Replicas()
	if err := parallel(replicas, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	for _, r := range replicas {
		ch.hist.Event("crash", r.Name, "SIGKILL (rollback after raise)")
	}
	snap, err := ch.snapshotFollower(ctx)
	if err != nil {
		return err
	}
	sleep(ctx, 3*time.Second)
	if err := ch.restoreEnsemble(ctx, snap); err != nil {
		return err
	}
	return parallel(replicas, func(n *Node) error { return n.Start(ctx) })
}

// rollbackReusingEpoch is the rollback the epoch alone cannot tell from
// the history it erases: a follower's data is copied (accepted epoch E),
// the whole ensemble restarts in between (an ordinary leader election:
// epoch E+1) and the workload takes IDs in E+1, then every server is
// restored from the copy. The restored ensemble elects a leader in
// E+1 again: the lost history's epoch. The replicas keep running, so their
// sessions and the workers' caches survive wherever ZooKeeper lets them.
func (ch *chaos) rollbackReusingEpoch(ctx context.Context) error {
	copied, err := ch.zooKeeperEpoch(ctx)
	if err != nil {
		return err
	}
	snap, err := ch.snapshotFollower(ctx)
	if err != nil {
		return err
	}
	zks := ch.c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Stop(ctx) }); err != nil {
		return err
	}
	if err := ch.startZooKeepers(ctx, zks...); err != nil {
		return err
	}
	restarted := time.Now()
	lost, err := ch.zooKeeperEpoch(ctx)
	if err != nil {
		return err
	}
	ch.hist.Event("note", "zookeeper", fmt.Sprintf("ensemble restarted: epoch %d (the copy's is %d)", lost, copied))
	// The history to be lost must hold IDs issued in the new epoch: wait
	// until every worker took IDs after the restart (the primary has
	// revalidated), then let it run a few seconds more.
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	err = ch.w.WaitProgress(wctx, restarted)
	cancel()
	if err != nil {
		return fmt.Errorf("before the rollback: %w", err)
	}
	sleep(ctx, 4*time.Second)
	if e, err := ch.zooKeeperEpoch(ctx); err == nil && e != lost {
		ch.hist.Event("note", "zookeeper", fmt.Sprintf("epoch moved on to %d before the rollback", e))
		lost = e
	}
	if err := ch.restoreEnsemble(ctx, snap); err != nil {
		return err
	}
	after, err := ch.zooKeeperEpoch(ctx)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("ZooKeeper epochs: copy %d, lost history %d, after the restore %d", copied, lost, after)
	if after != lost {
		msg += " (the restored epoch differs from the lost history's: this run did not reuse the epoch)"
	}
	ch.hist.Event("note", "zookeeper", msg)
	ch.logf("rollback reusing the epoch: %s", msg)
	return nil
}

// snapshotFollower stops a follower, copies its data, and starts it again.
func (ch *chaos) snapshotFollower(ctx context.Context) (ZooKeeperData, error) {
	_, followers, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return ZooKeeperData{}, err
	}
	f := followers[0]
	if err := f.Stop(ctx); err != nil {
		return ZooKeeperData{}, err
	}
	snap, err := f.SnapshotZooKeeperData(ctx)
	if err != nil {
		return snap, err
	}
	ch.hist.Event("note", f.Name, "data copied for a rollback")
	return snap, ch.startZooKeepers(ctx, f)
}

// restoreEnsemble kills every server, gives each the copy's data, and
// starts them.
func (ch *chaos) restoreEnsemble(ctx context.Context, snap ZooKeeperData) error {
	zks := ch.c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	if err := parallel(zks, func(n *Node) error { return n.RestoreZooKeeperData(ctx, snap) }); err != nil {
		return err
	}
	return ch.startZooKeepers(ctx, zks...)
}

// startZooKeepers starts servers and waits until the ensemble serves.
func (ch *chaos) startZooKeepers(ctx context.Context, servers ...*Node) error {
	return restartZooKeepers(ctx, ch.c, servers...)
}

// zooKeeperEpoch returns the ensemble's current epoch: the high 32 bits of
// its leader's last zxid (srvr). It waits up to 30 s for a leader.
func (ch *chaos) zooKeeperEpoch(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		leader, _, err := ch.c.ZooKeeperLeader(ctx)
		if err == nil {
			var zxid int64
			if zxid, err = leader.ZooKeeperZxid(ctx); err == nil {
				return zxid >> 32, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("read the ZooKeeper epoch: %w (%w)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
