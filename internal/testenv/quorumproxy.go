package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartEnsembleBehind is StartEnsemble with every server reaching the
// others' quorum ports (where a follower connects to its leader) through
// proxies, so that a test can hold a follower behind its leader
// (HoldBack) while it still serves its clients.
func StartEnsembleBehind(t testing.TB, n int) *Ensemble {
	t.Helper()
	e, err := NewEnsemble(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.StopAll)
	for _, s := range e.servers {
		s.quorumVia = make(map[int]*Proxy)
		for _, o := range e.servers {
			if o != s {
				s.quorumVia[o.id] = NewProxy(t, fmt.Sprintf("127.0.0.1:%d", o.peer))
			}
		}
		cfg := filepath.Join(e.dir, fmt.Sprintf("zk%d", s.id), "zoo.cfg")
		if err := os.WriteFile(cfg, []byte(e.config(s)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	return e
}

// HoldBack pauses server i's connections to the other servers' quorum
// ports (StartEnsembleBehind): a follower then serves its clients from
// what it has applied while the others commit without it, until Release,
// or until it gives up on its leader after syncLimit ticks (5 s). A sync
// through it waits for Release.
func (e *Ensemble) HoldBack(i int) {
	for _, p := range e.servers[i].quorumVia {
		p.Pause()
	}
}

// Release lets server i catch up after HoldBack.
func (e *Ensemble) Release(i int) {
	for _, p := range e.servers[i].quorumVia {
		p.Resume()
	}
}
