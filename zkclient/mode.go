package zkclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Mode is how a ZooKeeper ensemble runs, as far as seqkeeper's rollback
// detection cares. That detection (docs/architecture.md, "the epoch rule")
// needs every restore of ZooKeeper's data to start a new epoch in the zxid,
// which only a leader election does. A server in quorum mode holds one
// every time it starts, even alone (standaloneEnabled=false with a
// server.1= line); a standalone server never does.
type Mode int

const (
	// ModeUnknown: neither the /zookeeper/config znode nor the srvr
	// four-letter word told the mode.
	ModeUnknown Mode = iota
	// ModeQuorum: the servers run the quorum protocol and hold leader
	// elections, so a rollback of their data changes the epoch.
	ModeQuorum
	// ModeStandalone: a standalone server, which never holds an election:
	// a rollback of its data leaves the epoch as it was and goes unseen.
	ModeStandalone
)

// String returns "unknown", "quorum" or "standalone".
func (m Mode) String() string {
	switch m {
	case ModeQuorum:
		return "quorum"
	case ModeStandalone:
		return "standalone"
	}
	return "unknown"
}

// ConfigNode is the znode where ZooKeeper 3.5 and later publish the
// ensemble's membership.
const ConfigNode = "/zookeeper/config"

// srvrTimeout bounds one srvr exchange with one server.
const srvrTimeout = 5 * time.Second

// DetectMode tells whether the ensemble behind c runs in quorum or
// standalone mode, and says how it found out (or why it could not) in a
// sentence fit for a log line or an error message.
//
// It reads ConfigNode first: in quorum mode ZooKeeper 3.5+ keeps the
// server.N= lines there; a standalone server leaves it empty. An empty
// node is confirmed with srvr, so that an odd server that leaves it empty
// in quorum mode is not taken for standalone. When the node cannot be read
// (ZooKeeper 3.4 has none; an ACL may forbid it), DetectMode asks each of
// c.Servers() in turn with the srvr four-letter word ("Mode: standalone"
// against leader, follower, observer or read-only), which ZooKeeper always
// allows. When neither answers, the result is ModeUnknown.
func DetectMode(ctx context.Context, c *Client) (Mode, string) {
	data, _, err := c.Session().Get(ctx, ConfigNode)
	if err == nil {
		if n := configServers(data); n > 0 {
			return ModeQuorum, fmt.Sprintf("%s lists %d server.N= line(s), as in quorum mode", ConfigNode, n)
		}
		mode, why := srvrMode(ctx, c.Servers(), c.opts.TLS)
		if mode == ModeQuorum {
			return ModeQuorum, fmt.Sprintf("%s lists no servers, but %s", ConfigNode, why)
		}
		return ModeStandalone, fmt.Sprintf("%s lists no servers, as in standalone mode; %s", ConfigNode, why)
	}
	configErr := fmt.Sprintf("cannot read %s: %v", ConfigNode, err)
	if errors.Is(err, ErrNoNode) {
		configErr = fmt.Sprintf("%s does not exist (ZooKeeper older than 3.5)", ConfigNode)
	}
	mode, why := srvrMode(ctx, c.Servers(), c.opts.TLS)
	return mode, configErr + "; " + why
}

// configServers counts the server.N= lines of the data of ConfigNode.
func configServers(data []byte) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if k, _, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok && strings.HasPrefix(k, "server.") {
			n++
		}
	}
	return n
}

// srvrMode asks each server in turn with srvr until one names its mode.
// The sentence says which server answered what, or why none did.
func srvrMode(ctx context.Context, servers []string, tlsConfig *tls.Config) (Mode, string) {
	var failures []string
	for _, s := range servers {
		reply, err := FourLetterWordTLS(ctx, s, "srvr", tlsConfig)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", s, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		role, mode := srvrReplyMode(reply)
		if mode != ModeUnknown {
			return mode, fmt.Sprintf("srvr on %s says \"Mode: %s\"", s, role)
		}
		if role == "" {
			role = firstLine(reply)
		}
		failures = append(failures, fmt.Sprintf("%s answered %q", s, role))
	}
	if len(failures) == 0 {
		return ModeUnknown, "no servers to ask with srvr"
	}
	return ModeUnknown, "srvr did not tell the mode (" + strings.Join(failures, "; ") + ")"
}

// srvrReplyMode reads the "Mode: " line of a srvr reply: the role as the
// server wrote it, and what it means.
func srvrReplyMode(reply string) (string, Mode) {
	sc := bufio.NewScanner(strings.NewReader(reply))
	for sc.Scan() {
		role, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Mode: ")
		if !ok {
			continue
		}
		role = strings.TrimSpace(role)
		switch role {
		case "standalone":
			return role, ModeStandalone
		case "leader", "follower", "observer", "read-only":
			return role, ModeQuorum
		}
		return role, ModeUnknown
	}
	return "", ModeUnknown
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "nothing"
	}
	return s
}

// FourLetterWord sends cmd to the server at addr and returns its reply,
// bounded by ctx and srvrTimeout. go-zookeeper's FLWSrvr is not used: its
// parser rejects the build date format of ZooKeeper 3.5+ and knows no
// observers.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	return FourLetterWordTLS(ctx, addr, cmd, nil)
}

// FourLetterWordTLS is FourLetterWord over TLS with cfg (a ZooKeeper
// secureClientPort answers four-letter words too), or plain if cfg is nil.
func FourLetterWordTLS(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, srvrTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if cfg != nil {
		tc := cfg.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn, err = (&tls.Dialer{Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for b.Len() < 1<<16 {
		n, err := conn.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if b.Len() > 0 {
				return b.String(), nil // the server closes after replying
			}
			return "", err
		}
	}
	return b.String(), nil
}
