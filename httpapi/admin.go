package httpapi

import (
	"errors"
	"net/http"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// Operator is what the admin routes write with, as the `seqkeeper create`
// and `seqkeeper delete` commands do: the root's operator power
// (seqzk.Operator.Create, seqzk.Operator.Delete) and its store, which
// receives a deleted sequence's tombstone.
type Operator struct {
	Sequences *seqzk.Client
	Store     seqzk.Store
}

// CreateRequest is the body of POST /v1/sequences. Zero fields take the
// defaults: start 1, max 2^63-1, no windows.
type CreateRequest struct {
	Name    string `json:"name"`
	Start   int64  `json:"start,omitempty"`
	Max     int64  `json:"max,omitempty"`
	Windows int    `json:"windows,omitempty"`
}

// CreateResponse is the answer of POST /v1/sequences (201 when created,
// 200 when it existed with these settings) and the JSON output of
// `seqkeeper create`.
type CreateResponse struct {
	Sequence string `json:"sequence"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Windows  int    `json:"windows"`
	Created  bool   `json:"created"`
}

// DeleteResponse is the answer of DELETE /v1/sequences/{name} and the
// JSON output of `seqkeeper delete`.
type DeleteResponse struct {
	Sequence string `json:"sequence"`
	Deleted  bool   `json:"deleted"`
	// TombstoneCeiling is the highest ID the deleted sequence may have
	// handed out: a sequence created later under its name starts above.
	TombstoneCeiling int64 `json:"tombstone_ceiling"`
}

// handleCreate serves POST /v1/sequences.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	name, reg, err := createRequest(http.MaxBytesReader(w, r.Body, maxBody))
	switch {
	case errors.Is(err, sequence.ErrInvalidName):
		s.fail(w, r, err)
		return
	case err != nil:
		badRequest(w, "%v", err)
		return
	}
	created, err := s.admin.Sequences.Operator().Create(r.Context(), name, reg)
	if errors.Is(err, seqzk.ErrOtherSettings) {
		writeError(w, http.StatusConflict, CodeExists, err.Error()+"; delete it first, or use another name")
		return
	}
	if err != nil {
		s.failNamed(w, r, name, err)
		return
	}
	got := reg.Resolved()
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/sequences/"+name)
	}
	s.log.Info().Str("sequence", name).Bool("created", created).Str("remote", r.RemoteAddr).Msg("create over HTTP")
	writeJSON(w, status, CreateResponse{Sequence: name, Start: got.Start, End: got.End, Windows: got.Windows, Created: created})
}

// handleDelete serves DELETE /v1/sequences/{name}.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := sequence.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	ceiling, err := s.admin.Sequences.Operator().Delete(r.Context(), name, s.admin.Store)
	if errors.Is(err, seqzk.ErrContended) {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, err.Error())
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.mu.Lock()
	e := s.allocs[name]
	s.mu.Unlock()
	if e != nil {
		s.drop(e) // its IDs lie below the tombstone: never handed out again
	}
	s.handed.forget(name)
	s.log.Info().Str("sequence", name).Int64("tombstone_ceiling", ceiling).Str("remote", r.RemoteAddr).Msg("delete over HTTP")
	writeJSON(w, http.StatusOK, DeleteResponse{Sequence: name, Deleted: true, TombstoneCeiling: ceiling})
}

// handleStepDown serves POST /v1/step-down: a planned handover. When this
// replica is the root's primary it resigns, by the path a SIGTERM takes
// (its primary stops, its candidate node goes, the next candidate leads),
// and rejoins as the last candidate; it answers once the handover is
// done. 409 not_primary when it does not lead.
func (s *Server) handleStepDown(w http.ResponseWriter, r *http.Request) {
	led := false
	var err error
	if s.stepDown != nil {
		led, err = s.stepDown(r.Context())
	}
	switch {
	case err != nil:
		s.failNamed(w, r, "", err)
	case !led:
		writeError(w, http.StatusConflict, CodeNotPrimary, "this replica is not the primary: nothing to hand over ('seqkeeper leader' names the primary)")
	default:
		writeJSON(w, http.StatusOK, SteppedDown{SteppedDown: true})
	}
}

// SteppedDown is the answer of POST /v1/step-down.
type SteppedDown struct {
	SteppedDown bool `json:"stepped_down"`
}
