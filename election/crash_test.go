package election

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// solo is one candidate outside the cluster harness (whose checker counts
// the brief overlap a wrong crash guess allows as a violation): its own
// session, an Identity whose address is addr, its terms reported on terms.
type solo struct {
	client *zkclient.Client
	e      *Election
	terms  chan soloTerm
	cancel context.CancelFunc
	done   chan struct{}
}

type soloTerm struct {
	term  Term
	ended chan error // the term's cause, once it ends
}

func newSolo(t *testing.T, servers []string, path, name, addr string, probe time.Duration) *solo {
	t.Helper()
	log := testLogger(t).With().Str("replica", name).Logger()
	client, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: 10 * time.Second, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Client: client, Path: path, Identity: Identity{ID: name, Address: addr}, CrashProbe: probe, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &solo{client: client, e: e, terms: make(chan soloTerm, 4), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = e.Run(ctx, func(ctx context.Context, term Term) {
			st := soloTerm{term: term, ended: make(chan error, 1)}
			s.terms <- st
			<-ctx.Done()
			st.ended <- context.Cause(ctx)
		})
	}()
	t.Cleanup(func() { cancel(); <-s.done; client.Close() })
	return s
}

func (s *solo) term(t *testing.T, within time.Duration, what string) soloTerm {
	t.Helper()
	select {
	case st := <-s.terms:
		return st
	case <-time.After(within):
		t.Fatalf("timed out after %s waiting for %s", within, what)
		return soloTerm{}
	}
}

// listen returns a listener on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// The next in line deletes the node of a leader whose address refuses
// connections, without waiting for its session: here the leader's session
// is alive (a wrong guess, the case crash.go argues stays safe), so the
// test sees what that costs: the old leader ends its term on its node's
// deletion (ErrNodeLost), the successor leads, and no session expired.
// With the leader's process really gone, only the second half happens.
func TestNextInLineDeletesTheNodeOfALeaderWhosePortRefuses(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	path := z.Root + "/election"
	ln := listen(t)
	a := newSolo(t, z.Servers, path, "a", ln.Addr().String(), 50*time.Millisecond)
	first := a.term(t, 10*time.Second, "a to lead")
	b := newSolo(t, z.Servers, path, "b", "127.0.0.1:1", 50*time.Millisecond)
	eventually(t, 10*time.Second, "b probing a", func() bool { return b.e.probes.Load() >= 3 })
	if got := b.e.Stats().CrashDeletions; got != 0 {
		t.Fatalf("b deleted %d nodes while a's address accepted connections", got)
	}
	session := a.client.SessionID()
	_ = ln.Close()
	second := b.term(t, 10*time.Second, "b to lead after a's address refused")
	select {
	case cause := <-first.ended:
		if !errors.Is(cause, ErrNodeLost) {
			t.Errorf("a's term ended with %v; want ErrNodeLost", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a still leads after b took over")
	}
	if got := b.e.Stats().CrashDeletions; got != 1 {
		t.Errorf("b's CrashDeletions = %d; want 1", got)
	}
	if a.client.SessionID() != session || !a.client.HasSession() {
		t.Errorf("a's session changed or ended (%#x -> %#x): the handover must not have waited for it", session, a.client.SessionID())
	}
	if second.term.Epoch <= first.term.Epoch {
		t.Errorf("b's epoch %d is not above a's %d", second.term.Epoch, first.term.Epoch)
	}
}

// An address that never accepted a connection (a wrong advertise setting)
// is never taken for a dead process, nor is one that stops answering
// without refusing (a slow or cut network): the leader stays.
func TestProbeNeedsARefusalAfterAnAcceptedConnection(t *testing.T) {
	t.Parallel()
	closed := listen(t)
	refusing := closed.Addr().String()
	_ = closed.Close()
	e := &Election{crashProbe: 20 * time.Millisecond}
	for _, tc := range []struct{ what, addr string }{
		{"an address that always refused", refusing},
		{"an address that does not answer", "192.0.2.1:7070"}, // TEST-NET-1: nothing answers
	} {
		ctx, cancel := context.WithCancel(context.Background())
		before := e.probes.Load()
		dead := e.probe(ctx, tc.addr)
		deadline := time.Now().Add(10 * time.Second)
		for e.probes.Load() < before+5 && time.Now().Before(deadline) {
			select {
			case <-dead:
				t.Fatalf("%s (%s) was taken for a dead process", tc.what, tc.addr)
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
		if e.probes.Load() < before+5 {
			t.Fatalf("%s: only %d probes in 10s", tc.what, e.probes.Load()-before)
		}
	}
	if e.probe(context.Background(), "") != nil || (&Election{}).probe(context.Background(), refusing) != nil {
		t.Fatal("probe without an address, or with probing off, must never report")
	}

	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dead := e.probe(ctx, ln.Addr().String())
	before := e.probes.Load()
	eventually(t, 10*time.Second, "an accepted probe", func() bool { return e.probes.Load() > before })
	_ = ln.Close()
	select {
	case <-dead:
	case <-time.After(10 * time.Second):
		t.Fatal("an address that accepted and then refused was not taken for a dead process")
	}
}
