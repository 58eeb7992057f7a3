package testenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// A cluster of two serve processes: the election picks one, a killed
// primary is replaced, a killed replica comes back on its address, and a
// graceful stop exits 0.
func TestClusterOfServeProcesses(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ZooKeeper(t), ClusterOptions{Replicas: 2})
	if c.Len() != 2 || len(c.Endpoints()) != 2 || c.Endpoints()[0] != "http://"+c.Addr(0) {
		t.Fatalf("endpoints %v", c.Endpoints())
	}
	leader := func() int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if i := c.Leader(context.Background()); i >= 0 {
				return i
			}
			if time.Now().After(deadline) {
				t.Fatal("no replica leads")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := leader()
	c.Kill(first)
	if c.Running(first) {
		t.Fatalf("r%d runs after Kill", first)
	}
	if got := leader(); got != 1-first {
		t.Fatalf("after r%d was killed, r%d leads", first, got)
	}
	if err := c.Start(first); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(first, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(1 - first); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if got := leader(); got != first {
		t.Fatalf("after r%d stopped, r%d leads", 1-first, got)
	}
	if out, err := c.Run("create", "orders"); err != nil {
		t.Fatalf("%v (%s)", err, out)
	}
	log, err := os.ReadFile(c.LogPath(first))
	if err != nil || strings.Count(string(log), " started\n") != 2 {
		t.Fatalf("the log of r%d does not show two incarnations (%v):\n%s", first, err, log)
	}
}
