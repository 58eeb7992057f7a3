// Package election elects one primary among seqkeeper replicas through
// ZooKeeper, hands leadership over fast, and gives it up before a successor
// can start.
//
// Every replica runs an Election. Its Run creates a protected
// ephemeral-sequential candidate node under Config.Path
// (_c_<guid>-n_0000000042, data = the replica's Identity as JSON). The
// candidate with the lowest sequence number leads; every other candidate
// watches only its nearest lower sibling, so a departure wakes one replica,
// not all of them. A candidate that becomes the lowest writes its identity
// into its node again, which wakes the one behind it: the next in line,
// which probes the leader (see below). Leadership is a context handed to the caller's lead
// function together with a Term, and cancelled the moment leadership is lost.
//
// # When leadership ends
//
// The leader's context is cancelled when any of these happens:
//
//   - its candidate node is deleted (by the server, an operator, or Resign);
//   - its ZooKeeper session expires or is replaced (go-zookeeper opens a new
//     session silently; the session id tells);
//   - the client has had no acknowledged request for LossFraction of the
//     session timeout. The leader measures this itself, with a heartbeat that
//     goes through the ZooKeeper quorum (a transaction that checks its own
//     node and writes Path/leader-beat, which the next in line watches),
//     because the connection state alone is too late: go-zookeeper notices a
//     silent network only after two thirds of the session timeout, and a
//     follower cut off from the quorum keeps answering pings and reads. The
//     server cannot expire the session before one session timeout after the
//     last acknowledged request was sent, so the leader stops at least
//     (1 - LossFraction) of the session timeout before any successor can
//     start;
//   - the Client is closed, Resign is called, lead returns, or Run's
//     context is done.
//
// After a loss the replica deletes its node if its session still has it (so
// no stale node keeps the others waiting) and rejoins with a fresh one.
//
// # Fencing
//
// Term.Epoch strictly increases with every term, across all replicas: before
// calling lead, the new leader increments the epoch kept in the znode
// <Path>-epoch (a sibling of Path, so the candidate directory holds
// candidates only and can be deleted without resetting the epoch) in one
// multi-op that also checks its own candidate node, so the increment only
// succeeds while it still leads. Storage that records the epoch with every
// write and refuses writes from a lower epoch stops a deposed primary even
// where this package cannot (see below).
//
// # What is not guaranteed
//
//   - Leadership is a belief held by a process, checked on events and timers,
//     not a lock enforced by anyone. A leader that is paused (a long GC, a
//     SIGSTOP, a VM freeze, a suspended laptop) for longer than
//     (1 - LossFraction) of the session timeout wakes up still believing it
//     leads until its next check, which runs first thing but races with the
//     lead function's own goroutines; a successor may already be running.
//     Only the epoch fencing in the store protects the data against that.
//   - The margin also assumes the client's and the servers' clocks run at
//     the same rate and that the server granted the requested session
//     timeout (zkclient asks for it; a server whose maxSessionTimeout is lower
//     would shorten it).
//   - The epoch is strictly increasing only as long as ZooKeeper keeps its
//     data: after the ensemble loses its data, or <Path>-epoch is deleted,
//     it starts again from 1. The persistence layer keeps its own epoch in
//     the store and must not rely on this one alone.
//   - Leader and Observe report the lowest candidate in ZooKeeper: the replica
//     that leads or is about to lead. Right after a failure they can still
//     name a replica that has already stopped acting.
//   - Handover on a crash takes about one session timeout: the server must
//     expire the crashed replica's session first. Resign and graceful
//     shutdown (cancelling Run) hand over at once, and so does a crash
//     that leaves the leader's host answering, with Config.CrashProbe:
//     the next in line deletes the node of a leader whose published
//     address refuses connections (crash.go). That guess can be wrong (a
//     firewall's reset): the live leader then ends its term when it sees
//     its node deleted, possibly just after the successor started, as a
//     paused leader does (above). A host that vanishes, or a leader cut
//     off from ZooKeeper, hands over after the leader's lossAfter and an
//     eighth more: its heartbeat stands still, so it has stopped on its
//     own, and the next in line deletes its node (beat.go).
//   - Closing the Client while Run is running ends leadership as soon as the
//     own node's deletion is seen, but the successor is told by the server at
//     the same moment; cancel Run and wait for it before closing the Client.
package election
