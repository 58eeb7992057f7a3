package client

import (
	"errors"
	"fmt"
)

// Sentinels an *APIError matches with errors.Is, by its code (the codes of
// docs/http-api.md).
var (
	// ErrUnknownSequence: no such sequence (create it first).
	ErrUnknownSequence = errors.New("unknown sequence")
	// ErrInvalid: a bad name, count, body or idempotency key: fix the call.
	ErrInvalid = errors.New("invalid request")
	// ErrBadPush: the recycle was refused (the IDs could be handed out
	// twice); nothing was recycled.
	ErrBadPush = errors.New("recycle refused")
	// ErrNotHandedOut: the replica refused the recycle because it did not
	// hand out these IDs (or took them back already): leave them unused.
	// Recycle sends IDs to the replica that handed them out to this
	// Client; this comes back when that replica was restarted, or for IDs
	// another Client took.
	ErrNotHandedOut = errors.New("not handed out by this replica")
	// ErrExists: Create of a name that exists with other settings.
	ErrExists = errors.New("sequence exists with other settings")
	// ErrForbidden: an admin call (Create, Delete) without the admin
	// token, or to replicas whose admin routes are off.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: the token is missing or wrong.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrExhausted: the sequence's ID space is used up.
	ErrExhausted = errors.New("sequence exhausted")
	// ErrUncertain: a recycle's outcome is unknown. Without an idempotency
	// key the IDs count as lost: do not retry. With one, retry with the
	// same key.
	ErrUncertain = errors.New("outcome unknown")
	// ErrUnknownRoot: the replica serves no root of Options.Root's name
	// (unknown_root), or serves several and the call named none
	// (root_required): set Options.Root to one the message lists.
	ErrUnknownRoot = errors.New("unknown root")
	// ErrUnavailable: no replica could serve the call before the deadline
	// (every one answered 503 or did not answer); retry later.
	ErrUnavailable = errors.New("no replica available")
)

// APIError is an error answer of a replica.
type APIError struct {
	// Status is the HTTP status, Code the API's error code and Message its
	// explanation for people.
	Status        int
	Code, Message string
	// Endpoint is the replica that answered.
	Endpoint string

	retryAfter int // seconds, from a 503's Retry-After
}

func (e *APIError) Error() string {
	return fmt.Sprintf("seqkeeper %s: %d %s: %s", e.Endpoint, e.Status, e.Code, e.Message)
}

// Is matches the sentinel of e's code.
func (e *APIError) Is(target error) bool {
	switch e.Code {
	case "unknown_sequence":
		return target == ErrUnknownSequence
	case "bad_request", "invalid_name":
		return target == ErrInvalid
	case "bad_push":
		return target == ErrBadPush
	case "not_handed_out":
		return target == ErrNotHandedOut
	case "unauthorized":
		return target == ErrUnauthorized
	case "exists":
		return target == ErrExists
	case "forbidden":
		return target == ErrForbidden
	case "exhausted":
		return target == ErrExhausted
	case "uncertain":
		return target == ErrUncertain
	case "unknown_root", "root_required":
		return target == ErrUnknownRoot
	}
	return e.Status == 503 && target == ErrUnavailable
}
