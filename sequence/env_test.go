package sequence_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's sequences root on a real ZooKeeper. Workers use the
// public client; the primary's part (registering, raising) is played by an
// internal/seqzk client, as in production.
type env struct {
	t       testing.TB
	servers []string
	root    string
}

func newEnv(t testing.TB) *env {
	z := testenv.ZooKeeper(t)
	return &env{t: t, servers: z.Servers, root: z.SequencesRoot(t)}
}

// session opens a ZooKeeper session of its own, closed when the test ends.
func (e *env) session(timeout time.Duration) *zkclient.Client {
	e.t.Helper()
	c, err := zkclient.Dial(context.Background(), e.servers, zkclient.Options{SessionTimeout: timeout})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// client returns a worker's sequence client on a session of its own.
func (e *env) client(opts sequence.Options) *sequence.Client {
	e.t.Helper()
	opts.Root = e.root
	c, err := sequence.NewClient(e.session(10*time.Second), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// admin returns a client with the primary's powers.
func (e *env) admin() *seqzk.Client {
	e.t.Helper()
	c, err := seqzk.NewClient(e.session(10*time.Second), seqzk.Options{Root: e.root})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// create registers name and raises its ceiling, standing in for the primary.
func (e *env) create(name string, r seqzk.Registration, ceiling int64) {
	e.t.Helper()
	ctx := context.Background()
	a := e.admin()
	if err := a.Register(ctx, name, r); err != nil {
		e.t.Fatal(err)
	}
	if _, err := a.Keeper().Revalidate(ctx, name, 0, ceiling); err != nil {
		e.t.Fatal(err)
	}
}

// raiser keeps the ceiling of name at least reserve ahead of next until the
// test ends, as the primary would.
func (e *env) raiser(name string, reserve int64) {
	e.t.Helper()
	a := e.admin()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if st, _, err := a.Describe(ctx, name); err == nil && st.Ceiling-st.Next < reserve/2 {
				_, _ = a.Keeper().Raise(ctx, name, st.Next+reserve)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
