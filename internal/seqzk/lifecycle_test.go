package seqzk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// An advance beside a ZooKeeper restart: a stamp lands, its reply is lost,
// and ZooKeeper elects its leader again before the change reads the name.
// The stamp is in the epoch ZooKeeper left, so nobody may take from it;
// the change is decided again in the epoch of now (the client learns it by
// a write, not from the reading), and reports what its first transaction
// replaced: the state it was decided from, not its own.
func TestAStampWhoseReplyWasLostAcrossAnElectionIsDecidedAgain(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const root = "/all-sequences"
	admin := dialClient(t, ens.Servers(), root, 10*time.Second)
	if err := admin.ZK().EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Keeper().Revalidate(ctx, "s", 0, 1000); err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, ens.Addr(0))
	x := dialClient(t, []string{proxy.Addr()}, root, 30*time.Second)

	var (
		readings []seqzk.Holding
		first    string // the marker of the stamp whose reply is lost
		restart  = make(chan error, 1)
	)
	done, err := x.Keeper().Lifecycle(ctx, nil, "s", func(h seqzk.Holding, _ persist.Record) (seqzk.Step, error) {
		readings = append(readings, h)
		next := seqzk.Advanced(h.State, h.State.Next+100, h.State.Ceiling, h.Epoch)
		switch {
		case len(readings) == 1:
			// A take overtakes the first: the change has its root's
			// znodes in place before the next, whose reply is lost.
			if _, err := admin.Take(ctx, "s", 1); err != nil {
				return seqzk.Step{}, err
			}
		case first == "":
			first = next.Marker
			proxy.PauseReplies()
			go func() { restart <- restartOnceLanded(ctx, ens, proxy, admin, first) }()
		}
		return seqzk.Step{Change: seqzk.Change{State: &next}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-restart; err != nil {
		t.Fatal(err)
	}
	if len(readings) != 3 {
		t.Fatalf("decided %d times; want three (overtaken, the lost stamp, then again in the new epoch)", len(readings))
	}
	if again := readings[2]; again.State.Marker != first || again.Trusted() {
		t.Errorf("decided again from marker %s (trusted %v); want the lost stamp %s, untrusted", again.State.Marker, again.Trusted(), first)
	}
	if lost := readings[1].State; done.Landed || !done.Replaced.State.Equal(lost) {
		t.Errorf("done: landed %v, replaced %q; want not landed (in its epoch), replacing %q",
			done.Landed, done.Replaced.State.Encode(), lost.Encode())
	}
	epoch, err := admin.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.Keeper().Hold(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if st := h.State; !h.Trusted() || st.ZKEpoch != epoch {
		t.Errorf("ZooKeeper holds %q stamped in epoch %d, trusted %v; want a stamp in epoch %d", st.Encode(), st.ZKEpoch, h.Trusted(), epoch)
	}
}

// restartOnceLanded waits until the znode holds marker, then cuts the
// proxy's connections (the write's reply is never delivered), restarts
// ZooKeeper (a new leader epoch) and lets connections through again.
func restartOnceLanded(ctx context.Context, ens *testenv.Ensemble, proxy *testenv.Proxy, admin *seqzk.Client, marker string) error {
	for {
		st, _, err := admin.Describe(ctx, "s")
		if err == nil && st.Marker == marker {
			break
		}
		if ctx.Err() != nil {
			return errors.New("the stamp never landed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	proxy.Cut()
	proxy.Resume()
	ens.Stop(0)
	err := ens.Start(0)
	proxy.Heal()
	return err
}
