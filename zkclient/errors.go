package zkclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
)

// ZooKeeper's errors, for errors.Is. Operations return them unchanged (or
// wrapped), so callers never need the go-zookeeper package.
var (
	ErrNoNode       = zk.ErrNoNode
	ErrNodeExists   = zk.ErrNodeExists
	ErrBadVersion   = zk.ErrBadVersion
	ErrNotEmpty     = zk.ErrNotEmpty
	ErrNoAuth       = zk.ErrNoAuth
	ErrInvalidACL   = zk.ErrInvalidACL
	ErrBadArguments = zk.ErrBadArguments

	// The errors of a request lost with its connection or session. Whether
	// a write that failed with one of them took effect is unknown.
	ErrConnectionClosed = zk.ErrConnectionClosed
	ErrNoServer         = zk.ErrNoServer
	ErrSessionExpired   = zk.ErrSessionExpired
	ErrSessionMoved     = zk.ErrSessionMoved
	// ErrClosing is a request cut off because its connection was closed:
	// by Close (then operations return ErrClosed instead) or because the
	// client replaced the connection after a long disconnect.
	ErrClosing = zk.ErrClosing
)

// ErrClosed is returned by operations on a client after Close.
var ErrClosed = errors.New("zookeeper client closed")

// IsTransient reports whether err is a connection-level failure after which
// the same operation, from a fresh read, may succeed on a later connection:
// the request was lost with its connection or session, or there was no
// session to send it on. It is the one list of such errors; everything that
// retries on ZooKeeper failures uses it.
//
// A write that failed with a transient error may or may not have been
// applied; callers must re-read before deciding anything from it.
//
// A failure of the connection itself is transient too: go-zookeeper hands a
// request whose bytes could not be written (a reset connection, a broken
// pipe, a write deadline) the network's own error, whose outcome is as
// unknown as a lost reply's.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) {
		return false
	}
	for _, target := range []error{ErrConnectionClosed, ErrNoServer, ErrSessionExpired, ErrSessionMoved, ErrClosing, ErrNoSession,
		io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED} {
		if errors.Is(err, target) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// MultiError is the error of a transaction that one of its operations
// failed. It unwraps to that operation's error, so errors.Is(err,
// ErrBadVersion) tells a failed version check.
type MultiError struct {
	// Index is the position of the failed operation in the transaction.
	Index int
	// Op is the failed operation.
	Op  Op
	Err error
}

func (e *MultiError) Error() string {
	return fmt.Sprintf("zookeeper transaction: operation %d (%s): %v", e.Index, e.Op, e.Err)
}

func (e *MultiError) Unwrap() error { return e.Err }

// FailedOp returns the index of the operation that failed the transaction
// err came from, or -1 when err is not an operation's failure.
func FailedOp(err error) int {
	var me *MultiError
	if errors.As(err, &me) {
		return me.Index
	}
	return -1
}
