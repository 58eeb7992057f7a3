package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Error codes of the API. They are part of the contract (docs/http-api.md):
// clients branch on them, so they never change meaning.
const (
	CodeBadRequest       = "bad_request"           // 400: bad count, body or parameter
	CodeInvalidName      = "invalid_name"          // 400: not a valid sequence name
	CodeBadPush          = "bad_push"              // 400: recycle refused: the IDs could be handed out twice
	CodeUnauthorized     = "unauthorized"          // 401: missing or wrong bearer token
	CodeForbidden        = "forbidden"             // 403: an admin route without the admin token, or with admin routes off
	CodeUnknownSequence  = "unknown_sequence"      // 404: no such sequence
	CodeNotFound         = "not_found"             // 404: no such route
	CodeRootRequired     = "root_required"         // 404: a root's route on a replica of several roots, without /v1/roots/{root}
	CodeUnknownRoot      = "unknown_root"          // 404: /v1/roots/{root}/... of a root this replica does not serve
	CodeMethodNotAllowed = "method_not_allowed"    // 405
	CodeExhausted        = "exhausted"             // 409: the sequence's ID space is used up
	CodeExists           = "exists"                // 409: create of a name that exists with other settings
	CodeNotHandedOut     = "not_handed_out"        // 409: recycle of IDs this replica did not hand out: refused, leave them unused
	CodeNotPrimary       = "not_primary"           // 409: step-down of a replica that is not the primary
	CodeUncertain        = "uncertain"             // 500: recycle outcome unknown; without a key treat the IDs as lost, with one retry with the same key
	CodeCorrupt          = "corrupt_state"         // 500: the sequence's data is unreadable
	CodeInternal         = "internal"              // 500
	CodeCeilingReached   = "ceiling_reached"       // 503: reservation exhausted; retry later
	CodeZKUnavailable    = "zookeeper_unavailable" // 503: retry later
	CodeRecreated        = "recreated"             // 503: sequence re-created under a write; retry later
	CodeUnvalidated      = "unvalidated"           // 503: not yet revalidated after a ZooKeeper leader election, or a new sequence not yet stamped; retry shortly
	CodeShuttingDown     = "shutting_down"         // 503: this replica is stopping; use another
	CodeUnavailable      = "unavailable"           // 503: timed out or cancelled
	CodeNotReady         = "not_ready"             // 503: /readyz failed
)

// errNotHandedOut marks a recycle of IDs this replica did not hand out.
var errNotHandedOut = errors.New("recycle refused")

// errShuttingDown is returned for ID requests after Close.
var errShuttingDown = errors.New("this replica is shutting down; use another replica")

// ErrorBody is the JSON body of every error answer:
// {"error":{"code":"unknown_sequence","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail holds a stable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// classify maps an error to its HTTP status and API code.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, sequence.ErrInvalidName):
		return http.StatusBadRequest, CodeInvalidName
	case errors.Is(err, sequence.ErrInvalidPushKey):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, errNotHandedOut):
		return http.StatusConflict, CodeNotHandedOut
	case errors.Is(err, sequence.ErrBadPush):
		return http.StatusBadRequest, CodeBadPush
	case errors.Is(err, sequence.ErrUnknownSequence):
		return http.StatusNotFound, CodeUnknownSequence
	case errors.Is(err, sequence.ErrExhausted):
		return http.StatusConflict, CodeExhausted
	case errors.Is(err, sequence.ErrUncertain):
		return http.StatusInternalServerError, CodeUncertain
	case errors.Is(err, sequence.ErrCorrupt):
		return http.StatusInternalServerError, CodeCorrupt
	case errors.Is(err, sequence.ErrCeilingReached):
		return http.StatusServiceUnavailable, CodeCeilingReached
	case errors.Is(err, sequence.ErrRecreated):
		return http.StatusServiceUnavailable, CodeRecreated
	case errors.Is(err, sequence.ErrUnvalidated):
		return http.StatusServiceUnavailable, CodeUnvalidated
	case errors.Is(err, sequence.ErrClosed), errors.Is(err, errShuttingDown):
		return http.StatusServiceUnavailable, CodeShuttingDown
	case zkclient.IsTransient(err), errors.Is(err, zkclient.ErrClosed):
		return http.StatusServiceUnavailable, CodeZKUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an error answer. 503s carry Retry-After: the condition
// is expected to pass.
func writeError(w http.ResponseWriter, status int, code, message string) {
	if status == http.StatusServiceUnavailable && code != CodeShuttingDown {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: message}})
}
