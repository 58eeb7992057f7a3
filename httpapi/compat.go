package httpapi

import (
	"net/http"
	"strconv"
	"strings"

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

// handleTinyid serves Tinyid's nextIdSimple (GET or POST, parameters in
// the query or a form body): batchSize IDs (default 1) of sequence
// bizType, comma-separated. Like Tinyid, a batchSize above the replica's
// limit (max_count) gets the limit.
func (s *Server) handleTinyid(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		badRequest(w, "nextIdSimple: %v", err)
		return
	}
	name, count, err := tinyidParams(r.Form, s.maxCount)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	if err := sequence.ValidateName(name); err != nil {
		s.failNamed(w, r, name, err)
		return
	}
	got, ok := s.takeIDs(w, r, name, count)
	if !ok {
		return
	}
	var b strings.Builder
	for _, rg := range got {
		for id := rg.Start; id <= rg.End; id++ {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(id, 10))
		}
	}
	writeText(w, []byte(b.String()))
}

// writeText writes a compatibility answer.
func writeText(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h["Content-Type"] = textContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
