package seqzk_test

import (
	"slices"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestLayoutRolesAndKinds(t *testing.T) {
	id := func(s string) zkclient.ID { i, _ := zkclient.ParseID(s); return i }
	root := []zkclient.ACL{
		{Perms: zkclient.PermRead, ID: id("ip:10.0.0.0/8")},
		{Perms: zkclient.PermRead | zkclient.PermCreate, ID: id("x509:CN=w")},
		{Perms: zkclient.PermAll &^ zkclient.PermAdmin, ID: id("x509:CN=r")},
		{Perms: zkclient.PermAll, ID: id("x509:CN=a")},
	}
	l := seqzk.LayoutOf(root)
	for role, want := range map[seqzk.Role]string{seqzk.Reader: "ip:10.0.0.0/8", seqzk.Worker: "x509:CN=w", seqzk.Replica: "x509:CN=r", seqzk.Admin: "x509:CN=a"} {
		if got := l.Roles[role]; len(got) != 1 || got[0].String() != want {
			t.Errorf("%s: %v; want %s", role, got, want)
		}
	}
	// The root's ACL is the layout's root ACL: reading it back is stable.
	if got := l.ACL(seqzk.KindRoot); !slices.Equal(got, root) {
		t.Errorf("root ACL %v; want %v", got, root)
	}
	if w := l.Wider(seqzk.KindRoot, root); w != nil {
		t.Errorf("the root's own ACL is wider than its layout: %v", w)
	}
	// A worker may write a sequence but only read the marker; an identity
	// the layout does not name is wider whatever it holds.
	seq := []zkclient.ACL{{Perms: zkclient.PermRead | zkclient.PermWrite, ID: id("x509:CN=w")}}
	if w := l.Wider(seqzk.KindSequence, seq); w != nil {
		t.Errorf("worker rw on a sequence: %v", w)
	}
	if w := l.Wider(seqzk.KindMarker, seq); len(w) != 1 || w[0] != "x509:CN=w has rw (the layout gives r)" {
		t.Errorf("worker rw on the marker: %v", w)
	}
	if w := l.Wider(seqzk.KindMarker, []zkclient.ACL{{Perms: zkclient.PermRead, ID: id("world:anyone")}}); len(w) != 1 {
		t.Errorf("world read on the marker: %v", w)
	}
	// No layout: creates use the client's own ACL. An open root (world
	// alone, ZooKeeper's default) has none.
	if acl := (seqzk.Layout{}).ACL(seqzk.KindSequence); acl != nil {
		t.Errorf("zero layout gives %v", acl)
	}
	if l := seqzk.LayoutOf([]zkclient.ACL{{Perms: zkclient.PermAll, ID: id("world:anyone")}}); len(l.Roles) != 0 {
		t.Errorf("an open root has the layout %v", l.Roles)
	}
	// Leaves never carry create or delete.
	for _, k := range []seqzk.Kind{seqzk.KindRecord, seqzk.KindSequenceChild, seqzk.KindElectionChild, seqzk.KindMarker} {
		for role := seqzk.Reader; role <= seqzk.Admin; role++ {
			if p := k.Perms(role); p&(zkclient.PermCreate|zkclient.PermDelete) != 0 {
				t.Errorf("%s gives %s %s", k, role, p)
			}
		}
	}
}
