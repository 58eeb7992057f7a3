package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// Version wrap: ZooKeeper keeps a znode's data version in an int32 that
// wraps, and an expected version of -1 makes a write unconditional. The
// primary moves a busy sequence onto a fresh znode well before that
// (RotateVersion, set low here so the test crosses it many times: six
// rotations while each sequence is busy, two with -short) while workers
// take from it and from its windows; nothing is handed out twice, and the
// versions stay below the threshold plus the writes of one sweep.
func TestRotationUnderLoad(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	// Low, so that a windowed sequence rotates often too: its clients
	// carve windows sized from demand, so its own znode is written only
	// every few seconds.
	const rotateAt = 12
	rotations := int64(3)
	if testing.Short() {
		rotations = 1
	}
	run := r.start("p1", func(c *config.Primary) { c.RotateVersion = rotateAt })
	c := r.client(20 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "plain", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "windowed", seqzk.Registration{Windows: 3}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plain", "windowed"} {
		l := newLedger()
		wctx, cancel := context.WithCancel(ctx)
		wg := r.workers(wctx, 4, name, l)
		waitForUpTo(t, 2*time.Minute, name+": the first rotations", func() bool { return run.p.Stats().Rotated >= rotations })
		before := run.p.Stats().Rotated
		waitForUpTo(t, 2*time.Minute, name+": as many more", func() bool { return run.p.Stats().Rotated >= before+rotations })
		cancel()
		wg.Wait()
		l.check(t)
		_, stat, err := c.ZK().Session().Get(context.Background(), r.root+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d IDs taken by 4 workers across %d rotations; version now %d", name, l.issued, run.p.Stats().Rotated, stat.Version)
	}
}
