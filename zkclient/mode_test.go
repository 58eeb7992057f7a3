package zkclient

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// dial opens a Client on servers for the test.
func dial(t *testing.T, servers []string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), servers, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Real servers of both kinds: DetectMode reads /zookeeper/config, and the
// srvr fallback agrees with it.
func TestDetectMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *testenv.Ensemble
		want  Mode
		why   string // in DetectMode's explanation
		role  string // srvr's Mode line
	}{
		{"quorum-1", func(t testing.TB) *testenv.Ensemble { return testenv.StartEnsemble(t, 1) }, ModeQuorum, ConfigNode + " lists 1 server.N= line(s), as in quorum mode", "leader"},
		{"quorum-3", func(t testing.TB) *testenv.Ensemble { return testenv.StartEnsemble(t, 3) }, ModeQuorum, ConfigNode + " lists 3 server.N= line(s)", ""},
		{"standalone", testenv.StartStandalone, ModeStandalone, ConfigNode + ` lists no servers, as in standalone mode; srvr on`, "standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := dial(t, e.Servers())
			mode, why := DetectMode(ctx, c)
			t.Logf("%s: %s (%s)", tc.name, mode, why)
			if mode != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("DetectMode = %s, %q; want %s with %q", mode, why, tc.want, tc.why)
			}
			// The fallback alone, on every server.
			for i := 0; i < e.Len(); i++ {
				mode, why := srvrMode(ctx, []string{e.Addr(i)})
				if mode != tc.want {
					t.Fatalf("srvrMode(%s) = %s, %q; want %s", e.Addr(i), mode, why, tc.want)
				}
				if tc.role != "" && !strings.Contains(why, `"Mode: `+tc.role+`"`) {
					t.Fatalf("srvrMode(%s) = %q; want it to quote Mode: %s", e.Addr(i), why, tc.role)
				}
			}
		})
	}
}

// The srvr fallback skips servers that do not answer and says why when
// none does.
func TestSrvrModeUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	closed := closedAddr(t)
	mode, why := srvrMode(ctx, []string{closed})
	if mode != ModeUnknown || !strings.Contains(why, "srvr did not tell the mode") || !strings.Contains(why, closed) {
		t.Fatalf("srvrMode(closed port) = %s, %q; want unknown naming %s", mode, why, closed)
	}
	if mode, why := srvrMode(ctx, nil); mode != ModeUnknown || why == "" {
		t.Fatalf("srvrMode(no servers) = %s, %q", mode, why)
	}
	e := testenv.StartStandalone(t)
	mode, why = srvrMode(ctx, []string{closed, e.Addr(0)})
	if mode != ModeStandalone || !strings.Contains(why, e.Addr(0)) {
		t.Fatalf("srvrMode(closed, standalone) = %s, %q; want standalone from %s", mode, why, e.Addr(0))
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// The parsers, on replies as ZooKeeper 3.8 writes them (copied from real
// servers) and on the ones it writes when it cannot answer.
func TestModeParsers(t *testing.T) {
	t.Parallel()
	for data, want := range map[string]int{
		"": 0,
		"server.1=127.0.0.1:22888:23888:participant\nversion=0":                                                  1,
		"server.1=z1:2888:3888:participant;0.0.0.0:2181\nserver.2=z2:2888:3888:observer;2181\nversion=100000000": 2,
		"version=0\n": 0,
	} {
		if got := configServers([]byte(data)); got != want {
			t.Errorf("configServers(%q) = %d, want %d", data, got, want)
		}
	}
	const srvr = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\n" +
		"Received: 1\nSent: 0\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: %s\nNode count: 5\n"
	for reply, want := range map[string]Mode{
		strings.Replace(srvr, "%s", "standalone", 1):                  ModeStandalone,
		strings.Replace(srvr, "%s", "leader", 1):                      ModeQuorum,
		strings.Replace(srvr, "%s", "follower", 1):                    ModeQuorum,
		strings.Replace(srvr, "%s", "observer", 1):                    ModeQuorum,
		strings.Replace(srvr, "%s", "read-only", 1):                   ModeQuorum,
		strings.Replace(srvr, "%s", "martian", 1):                     ModeUnknown,
		"This ZooKeeper instance is not currently serving requests\n": ModeUnknown,
		"srvr is not executed because it is not in the whitelist.\n":  ModeUnknown,
		"": ModeUnknown,
	} {
		if _, got := srvrReplyMode(reply); got != want {
			t.Errorf("srvrReplyMode(%q) = %s, want %s", reply, got, want)
		}
	}
	for m, want := range map[Mode]string{ModeUnknown: "unknown", ModeQuorum: "quorum", ModeStandalone: "standalone", Mode(9): "unknown"} {
		if m.String() != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), m.String(), want)
		}
	}
}
