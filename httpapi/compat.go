package httpapi

import (
	"fmt"
	"net/http"
	"path"
	"strconv"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// The compatibility routes serve the read routes of two ID services our
// users run, so that their clients can point at a replica without code
// changes: Meituan's Leaf (segment mode) and Tinyid. Each takes IDs from
// the replica's allocator like POST /v1/sequences/{name}/ids, behind the
// same token, which their clients, sending no header, may give as the
// query parameter token. Their answers are the bare text those clients
// parse; errors are the API's JSON errors, with the API's statuses
// (Leaf answers 500 and Tinyid an empty 200 for every error: a client
// sees a failure either way, ours says which).

// textContentType is the content type of the compatibility answers.
var textContentType = []string{"text/plain; charset=utf-8"}

// handleLeaf serves Leaf's GET /api/segment/get/{key}: one ID of sequence
// key, as a bare decimal number.
func (s *Server) handleLeaf(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("key")
	if err := sequence.ValidateName(name); err != nil {
		s.failNamed(w, r, name, err)
		return
	}
	got, ok := s.takeIDs(w, r, name, 1)
	if !ok {
		return
	}
	writeText(w, strconv.AppendInt(nil, got[0].Start, 10))
}

// handleTinyid serves Tinyid's nextIdSimple and nextId (simple false),
// GET or POST, parameters in the query or a form body: batchSize IDs
// (default 1) of sequence bizType, comma-separated, or for nextId in
// Tinyid's JSON envelope, {"data":[ids],"code":200,"message":""}. Like
// Tinyid, a batchSize above the replica's limit (max_count) gets the
// limit.
func (s *Server) handleTinyid(w http.ResponseWriter, r *http.Request, simple bool) {
	name, count, ok := s.tinyidRequest(w, r, true)
	if !ok {
		return
	}
	got, ok := s.takeIDs(w, r, name, count)
	if !ok {
		return
	}
	ids := make([]int64, 0, got.Count())
	for _, rg := range got {
		for id := rg.Start; id <= rg.End; id++ {
			ids = append(ids, id)
		}
	}
	if !simple {
		writeJSON(w, http.StatusOK, tinyidAnswer{Data: ids, Code: http.StatusOK})
		return
	}
	b := make([]byte, 0, 12*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	writeText(w, b)
}

// handleTinyidSegment serves Tinyid's nextSegmentIdSimple, the route
// Tinyid's Java client calls, and nextSegmentId (simple false): a segment
// of sequence bizType for one client, which hands out (currentId, maxId]
// itself and asks for the next once it passes loadingId. Simple answers
// currentId,loadingId,maxId,delta,remainder as text; the other, the same
// in Tinyid's JSON envelope.
func (s *Server) handleTinyidSegment(w http.ResponseWriter, r *http.Request, simple bool) {
	name, _, ok := s.tinyidRequest(w, r, false)
	if !ok {
		return
	}
	seg, err := s.nextSegment(r.Context(), name)
	if err != nil {
		s.failNamed(w, r, name, err)
		return
	}
	s.served.Add(seg.MaxID - seg.CurrentID)
	if simple {
		writeText(w, fmt.Appendf(nil, "%d,%d,%d,%d,%d", seg.CurrentID, seg.LoadingID, seg.MaxID, seg.Delta, seg.Remainder))
		return
	}
	writeJSON(w, http.StatusOK, tinyidAnswer{Data: seg, Code: http.StatusOK})
}

// tinyidAnswer is the envelope of Tinyid's JSON answers.
type tinyidAnswer struct {
	Data    any    `json:"data"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// tinyidRequest reads a Tinyid request's parameters (the query, or a POST's
// form body): the sequence bizType and, where the route takes one,
// batchSize. On failure it answers the error and returns false.
func (s *Server) tinyidRequest(w http.ResponseWriter, r *http.Request, batch bool) (string, int64, bool) {
	route := path.Base(r.URL.Path) // Tinyid's name of it: nextId, nextSegmentIdSimple, ...
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		badRequest(w, "%s: %v", route, err)
		return "", 0, false
	}
	name, count, err := tinyidParams(r.Form, route, batch, s.maxCount)
	if err != nil {
		badRequest(w, "%v", err)
		return "", 0, false
	}
	if err := sequence.ValidateName(name); err != nil {
		s.failNamed(w, r, name, err)
		return "", 0, false
	}
	return name, count, true
}

// writeText writes a compatibility answer.
func writeText(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h["Content-Type"] = textContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
