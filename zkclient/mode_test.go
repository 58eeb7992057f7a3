package zkclient

import (
	"strings"
	"testing"
)

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
