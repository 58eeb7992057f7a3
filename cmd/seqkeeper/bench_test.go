package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A sequence created just before bench is a registration until the
// primary's first store write: bench waits for it before it starts the
// clock, says how long, and gives up after the ceiling wait.
func TestBenchWaitsForTheFirstInitialisation(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_CEILING_WAIT"] = "5s"
	c.ok("create", "fresh", "--windows", "2")
	go func() {
		time.Sleep(300 * time.Millisecond)
		c.initialise("fresh", 1<<40)
	}()
	var res benchResult
	// The run is long enough for the first takes to finish on a loaded
	// machine: each carves a window first (a dozen round trips between
	// the two clients).
	out := c.ok("bench", "fresh", "--clients", "2", "--batch", "1", "--duration", "2s", "-o", "json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench -o json: %q: %v", out, err)
	}
	// How long bench waited depends on when its process got going (the
	// initialisation is 300 ms after the test's clock, not bench's), so
	// only that it waited is certain.
	if res.InitWaitSeconds <= 0 || res.IDs == 0 || res.Duplicates != 0 {
		t.Fatalf("bench result %+v: want IDs taken after waiting for the initialisation", res)
	}

	c.env["SEQKEEPER_CEILING_WAIT"] = "200ms"
	c.ok("create", "never")
	if _, errOut, code := c.run("", "bench", "never", "--duration", "100ms"); code != 1 || !strings.Contains(errOut, "not initialised after 200ms") {
		t.Fatalf("bench of a sequence no primary initialises: exit %d %q", code, errOut)
	}
}
