package zkclient_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// dial opens a Client on servers for the test.
func dial(t *testing.T, servers []string) *zkclient.Client {
	t.Helper()
	c, err := zkclient.Dial(context.Background(), servers, zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Real servers of both kinds: zkclient.DetectMode reads /zookeeper/config, and the
// srvr fallback agrees with it.
func TestDetectMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *testenv.Ensemble
		want  zkclient.Mode
		why   string // in zkclient.DetectMode's explanation
		role  string // srvr's zkclient.Mode line
	}{
		{"quorum-1", func(t testing.TB) *testenv.Ensemble { return testenv.StartEnsemble(t, 1) }, zkclient.ModeQuorum, zkclient.ConfigNode + " lists 1 server.N= line(s), as in quorum mode", "leader"},
		{"quorum-3", func(t testing.TB) *testenv.Ensemble { return testenv.StartEnsemble(t, 3) }, zkclient.ModeQuorum, zkclient.ConfigNode + " lists 3 server.N= line(s)", ""},
		{"standalone", testenv.StartStandalone, zkclient.ModeStandalone, zkclient.ConfigNode + ` lists no servers, as in standalone mode; srvr on`, "standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := dial(t, e.Servers())
			mode, why := zkclient.DetectMode(ctx, c)
			t.Logf("%s: %s (%s)", tc.name, mode, why)
			if mode != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("zkclient.DetectMode = %s, %q; want %s with %q", mode, why, tc.want, tc.why)
			}
			// The fallback alone, on every server.
			for i := 0; i < e.Len(); i++ {
				mode, why := zkclient.SrvrMode(ctx, []string{e.Addr(i)}, nil)
				if mode != tc.want {
					t.Fatalf("zkclient.SrvrMode(%s) = %s, %q; want %s", e.Addr(i), mode, why, tc.want)
				}
				if tc.role != "" && !strings.Contains(why, `"Mode: `+tc.role+`"`) {
					t.Fatalf("zkclient.SrvrMode(%s) = %q; want it to quote Mode: %s", e.Addr(i), why, tc.role)
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
	mode, why := zkclient.SrvrMode(ctx, []string{closed}, nil)
	if mode != zkclient.ModeUnknown || !strings.Contains(why, "srvr did not tell the mode") || !strings.Contains(why, closed) {
		t.Fatalf("zkclient.SrvrMode(closed port) = %s, %q; want unknown naming %s", mode, why, closed)
	}
	if mode, why := zkclient.SrvrMode(ctx, nil, nil); mode != zkclient.ModeUnknown || why == "" {
		t.Fatalf("zkclient.SrvrMode(no servers) = %s, %q", mode, why)
	}
	e := testenv.StartStandalone(t)
	mode, why = zkclient.SrvrMode(ctx, []string{closed, e.Addr(0)}, nil)
	if mode != zkclient.ModeStandalone || !strings.Contains(why, e.Addr(0)) {
		t.Fatalf("zkclient.SrvrMode(closed, standalone) = %s, %q; want standalone from %s", mode, why, e.Addr(0))
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
