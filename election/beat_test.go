package election

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// standIn makes a candidate node that no Election owns, at the head of
// the queue of path, in a session of its own that stays alive: a leader
// whose heartbeat the test writes, or does not write, by hand.
func standIn(t *testing.T, servers []string, dir string) (client *zkclient.Client, node string) {
	t.Helper()
	client = testenv.Connect(t, servers, 10*time.Second)
	if err := client.EnsurePath(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	node, err := client.Session().Create(context.Background(), dir+"/"+nodePrefix+"standin"+seqMarker, []byte(`{"id":"standin"}`), zkclient.Ephemeral|zkclient.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	return client, node
}

func writeBeat(t *testing.T, client *zkclient.Client, dir string, b beatData) {
	t.Helper()
	data, _ := json.Marshal(b)
	_, err := client.Session().Set(context.Background(), dir+"/"+beatName, data, zkclient.AnyVersion)
	if errors.Is(err, zkclient.ErrNoNode) {
		_, err = client.Session().Create(context.Background(), dir+"/"+beatName, data, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, client *zkclient.Client, p string) bool {
	t.Helper()
	ok, _, err := client.Session().Exists(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// The next in line deletes the node of a predecessor whose beat names it
// and has stood still for the predecessor's lossAfter and an eighth more,
// although the predecessor's session is alive; a beat that keeps moving
// keeps the node, and so does a beat of another node, or none at all (a
// leader of an older version).
func TestNextInLineDeletesTheNodeOfAPredecessorWhoseBeatStops(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := z.Root + "/election"
	owner, node := standIn(t, z.Servers, dir)
	b := newSolo(t, z.Servers, dir, "b", "", 50*time.Millisecond)

	// No beat, then a beat of another node: b waits.
	time.Sleep(time.Second)
	writeBeat(t, owner, dir, beatData{Node: nodePrefix + "other" + seqMarker + "0000000001", LossAfterMS: 100})
	time.Sleep(time.Second)
	if !exists(t, owner, node) || b.e.Stats().CrashDeletions != 0 {
		t.Fatal("b deleted a node whose beat it never saw")
	}

	// A beat of the stand-in that moves every 100 ms, with a lossAfter of
	// 200 ms: b waits.
	var stopped time.Time
	for range 15 {
		writeBeat(t, owner, dir, beatData{Node: path.Base(node), LossAfterMS: 200})
		stopped = time.Now()
		time.Sleep(100 * time.Millisecond)
	}
	if !exists(t, owner, node) || b.e.Stats().CrashDeletions != 0 {
		t.Fatal("b deleted a node whose beat kept moving")
	}

	// The beat stops: b deletes the node (it stood still for 250 ms, plus
	// up to two reads) and leads, while the stand-in's session lives on.
	session := owner.SessionID()
	b.term(t, 10*time.Second, "b to lead after the stand-in's beat stopped")
	// b may have first read the last beat a moment before the test had
	// the write's reply (stopped); the bound leaves that moment 50 ms.
	if took := time.Since(stopped); took < 200*time.Millisecond {
		t.Errorf("b led %s after the beat stopped; the beat must stand still for 250 ms first", took)
	}
	if exists(t, owner, node) {
		t.Error("b leads and the stand-in's node is still there")
	}
	if got := b.e.Stats().CrashDeletions; got != 1 {
		t.Errorf("b's CrashDeletions = %d; want 1", got)
	}
	if owner.SessionID() != session || !owner.HasSession() {
		t.Error("the stand-in's session changed: the deletion must not have waited for it")
	}
}

// A healthy leader beats every lossAfter/4, so the next in line never
// deletes its node, however long it waits; the beat names the leader.
func TestALeaderWhoseBeatMovesKeepsItsNode(t *testing.T) {
	t.Parallel()
	// lossAfter 5 s: the next in line deletes after 6.25 s without a beat.
	c := newCluster(t, clusterOpts{crashProbe: 50 * time.Millisecond})
	rs := five(t, c)
	first := c.waitTerm(0, time.Second)
	time.Sleep(8 * time.Second)
	if c.termCount() != 1 || !c.snapshot(first).end.IsZero() {
		t.Fatalf("the first term ended (%d terms) while its leader was healthy", c.termCount())
	}
	for _, r := range rs {
		if n := r.e.Stats().CrashDeletions; n != 0 {
			t.Errorf("%s deleted %d nodes of a healthy leader", r.name, n)
		}
	}
	data, _, err := rs[1].client.Session().Get(context.Background(), c.path+"/"+beatName)
	if err != nil {
		t.Fatal(err)
	}
	var b beatData
	if err := json.Unmarshal(data, &b); err != nil || b.Node != path.Base(first.term.Node) || b.LossAfterMS != 5000 {
		t.Errorf("beat %s (%v); want the leader's node %s and 5000 ms", data, err, path.Base(first.term.Node))
	}
}

// A leader cut off from ZooKeeper stops at lossAfter, and the next in line
// sees its beat stand still and takes over before the server expires the
// old session: the handover no longer waits for the session when the host
// vanishes. The harness's checker holds it to no overlap: the old leader
// stopped on its own before its node was deleted.
func TestNextInLineTakesOverFromACutOffLeaderBeforeItsSessionExpires(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second // lossAfter 5 s: the beat stands still 6.25 s
	c := newCluster(t, clusterOpts{proxied: true, timeout: timeout, crashProbe: 50 * time.Millisecond})
	rs := five(t, c)
	first := c.waitTerm(0, time.Second)
	at := time.Now()
	rs[0].proxy.Pause()
	second := c.waitTerm(1, 2*timeout)
	if second.replica != rs[1] {
		t.Fatalf("successor is %s; want b", second.replica.name)
	}
	assertHandover(t, c, first, second)
	took := second.start.Sub(at)
	if !errors.Is(c.snapshot(first).cause, ErrContactLost) {
		t.Errorf("old term ended with %v; want ErrContactLost", c.snapshot(first).cause)
	}
	if got := rs[1].e.Stats().CrashDeletions; got != 1 {
		t.Errorf("b's CrashDeletions = %d, handover after %s; want 1: b deleted the node, not the session's expiry", got, took)
	}
	t.Logf("handover %s after the leader was cut off (session timeout %s)", took.Round(time.Millisecond), timeout)
	rs[0].proxy.Resume()
	eventually(t, 2*timeout, "the old leader to rejoin", func() bool { return rs[0].e.Stats().Candidacies == 2 })
}
