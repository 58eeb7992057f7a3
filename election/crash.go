package election

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A crashed leader's candidate node stays until the server expires its
// session, one session timeout after the process last spoke: every
// handover after a crash waited that long, although most
// crashes (a panic, an OOM kill, a container that exits) leave the host
// answering, and a port nobody listens on any more refuses connections at
// once. So the candidate next in line (the one whose predecessor is the
// lowest: the leader, or the candidate about to lead) probes the address
// its predecessor published (Identity.Address) with a TCP connect every
// Config.CrashProbe. Once that address, having accepted a connection,
// refuses crashRefusals connects in a row, the process behind it is gone:
// the candidate deletes the predecessor's node (at the version it read,
// so only that node) and the handover goes on at once.
//
// Only a refusal counts: a timeout or an unreachable host may be a slow
// network with the leader alive, and is left to the session. A refusal
// from a live process is possible (a firewall rejecting with a reset, a
// replica advertising another's address after it accepted once), and then
// the live leader loses its node: it sees the deletion through its own
// node's watch and ends its term (ErrNodeLost), as it does when an
// operator deletes the node, and until it does the store's epoch fencing
// stops its writes, as for a leader paused past its session
// (docs/guarantees.md). An address that never accepted a connection (a
// misconfigured advertise address) is never taken for dead. A host that
// gives no answer at all is the heartbeat's case (beat.go).
//
// A candidate knows it is next in line when it reads the queue, and later
// through the data watch on its predecessor, its only watch: a candidate
// that finds itself the lowest writes its node's data again, the same
// identity (markLowest), so the node's version leaves 0 and its
// successor's watch fires. A successor that reads its predecessor at a
// version above 0 is next in line, whatever queue it read before. So each
// leader's successor probes it, not only the first after a start. A
// leader whose write fails, or of a version that does not write, leaves a
// successor that became next in line while it waited to the session
// timeout.

// crashRefusals is how many refused connects in a row, after one that was
// accepted, declare the predecessor's process gone: one refusal can be a
// listener between its close and a restart's bind.
const crashRefusals = 2

// ErrCrashed ends nothing of ours; it is the reason logged, and counted in
// Stats.CrashDeletions, when a candidate deletes its crashed predecessor's
// node.
var ErrCrashed = errors.New("election: the predecessor's process is gone (its address refuses connections)")

// predecessor is what a waiting candidate read of the node it watches.
type predecessor struct {
	node    string
	version int32
	address string // its Identity.Address; "" when it published none
	gone    <-chan zkclient.Event
}

// readPredecessor reads pred's identity and version, and sets the watch
// on its data, which fires when pred is deleted or marked lowest.
func (e *Election) readPredecessor(ctx context.Context, pred string) (predecessor, error) {
	return call(ctx, e, func(s zkclient.Session) (predecessor, error) {
		data, st, ch, err := s.GetW(ctx, pred)
		if err != nil {
			return predecessor{}, err
		}
		p := predecessor{node: pred, version: st.Version, gone: ch}
		var id Identity
		if json.Unmarshal(data, &id) == nil {
			p.address = id.Address
		}
		return p, nil
	})
}

// probe connects to addr every e.crashProbe until ctx ends, and closes the
// channel it returns once addr, after accepting a connection, has refused
// crashRefusals connects in a row. It returns nil (never ready) when
// probing is off or there is no address.
func (e *Election) probe(ctx context.Context, addr string) <-chan struct{} {
	if e.crashProbe <= 0 || addr == "" {
		return nil
	}
	dead := make(chan struct{})
	go func() {
		tick := time.NewTicker(e.crashProbe)
		defer tick.Stop()
		dialer := net.Dialer{Timeout: e.crashProbe}
		accepted, refused := false, 0
		for {
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			e.probes.Add(1)
			switch {
			case err == nil:
				_ = conn.Close()
				accepted, refused = true, 0
			case errors.Is(err, syscall.ECONNREFUSED) && accepted:
				if refused++; refused >= crashRefusals {
					close(dead)
					return
				}
			default:
				refused = 0 // no answer is no evidence
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return dead
}

// markLowest writes c's identity into its node again, to wake its
// successor (see above). A failure costs only that wake-up.
func (e *Election) markLowest(ctx context.Context, c *candidate) {
	ctx, cancel := context.WithTimeout(ctx, e.lossAfter)
	defer cancel()
	_, err := call(ctx, e, func(s zkclient.Session) (*zkclient.Stat, error) {
		return s.Set(ctx, c.node, e.data, zkclient.AnyVersion)
	})
	if err != nil {
		e.logc(zerolog.InfoLevel, c).Err(err).Msg("election: could not mark the candidate node lowest; if this leader crashes, a successor that became next in line meanwhile waits for its session to expire")
	}
}

// deleteCrashed deletes the node of a predecessor whose process is gone, at
// the version read, so that a node created since is never touched.
func (e *Election) deleteCrashed(ctx context.Context, c *candidate, p predecessor) {
	err := e.deleteNode(ctx, p.node, p.version, e.client.SessionTimeout())
	ev := e.logc(zerolog.WarnLevel, c).Str("predecessor", p.node).Str("address", p.address).AnErr("cause", ErrCrashed)
	switch {
	case err == nil:
		e.crashDeletions.Add(1)
		ev.Msg("election: deleted the candidate node of a crashed predecessor rather than wait for its session to expire")
	case errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrBadVersion):
		ev.Msg("election: a crashed predecessor's node went meanwhile")
	default:
		ev.Err(err).Msg("election: could not delete a crashed predecessor's node; waiting for its session to expire")
	}
}
