package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// handleIDs serves POST /v1/sequences/{name}/ids?count=N.
func (s *Server) handleIDs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := sequence.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	count, err := idsCount(r.URL.RawQuery, s.maxCount)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	got, ok := s.takeIDs(w, r, name, count)
	if ok {
		writeIDs(w, name, got)
	}
}

// takeIDs hands out count IDs of sequence name from the replica's
// allocator, for the routes that take IDs; on failure it answers the
// error and returns false.
func (s *Server) takeIDs(w http.ResponseWriter, r *http.Request, name string, count int64) (sequence.Ranges, bool) {
	e, err := s.allocator(name)
	if err != nil {
		s.failNamed(w, r, name, err)
		return nil, false
	}
	got, err := s.pull(r.Context(), e, count)
	if err != nil {
		if errors.Is(err, sequence.ErrUnknownSequence) {
			s.drop(e)
			s.handed.forget(name)
		}
		s.failNamed(w, r, name, err)
		return nil, false
	}
	s.handed.add(name, got)
	s.served.Add(got.Count())
	e.served.Add(got.Count())
	return got, true
}

// Shared header values of the ID answer (net/http only reads them).
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// writeIDs writes the answer of the ID route, IDsResponse's JSON, by hand:
// it is the route that must be as fast as a bare handler, and encoding/json
// with IDRanges.MarshalJSON costs several allocations per answer. name is
// a valid sequence name, which needs no escaping. TestIDAnswerIsJSON
// checks it against encoding/json.
func writeIDs(w http.ResponseWriter, name string, rs sequence.Ranges) {
	buf := make([]byte, 0, 48+len(name)+40*len(rs))
	buf = append(buf, `{"sequence":"`...)
	buf = append(buf, name...)
	buf = append(buf, `","ranges":[`...)
	for i, r := range rs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, r.Start, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, r.End, 10)
		buf = append(buf, ']')
	}
	buf = append(buf, "]}\n"...)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
}

// pull takes count IDs from e's allocator and returns them as ascending,
// coalesced ranges. When the allocator fails after handing out some IDs it
// returns those (fewer than count, as sequence.Client.Take does at the
// ceiling); if the caller has gone away it pushes them back instead.
func (s *Server) pull(ctx context.Context, e *allocEntry, count int64) (sequence.Ranges, error) {
	if count > 1 {
		e.bulk.Lock()
		defer e.bulk.Unlock()
	}
	var got []sequence.Range
	var n int64
	for ; n < count; n++ {
		id, err := e.alloc.Next(ctx)
		if err != nil {
			if n == 0 {
				return nil, err
			}
			if ctx.Err() != nil {
				s.pushBack(ctx, e.name, got, err)
				return nil, err
			}
			s.log.Info().Err(err).Str("sequence", e.name).Int64("count", count).Int64("handed_out", n).Msg("answering with fewer IDs than asked")
			break
		}
		if k := len(got) - 1; k >= 0 && got[k].End+1 == id {
			got[k].End = id
		} else {
			got = append(got, sequence.Range{Start: id, End: id})
		}
	}
	rs, err := sequence.NormalizeRanges(got)
	if err != nil {
		// The allocator handed out one ID twice: never pass that on.
		return nil, fmt.Errorf("sequence %q: allocator returned overlapping IDs (a bug; please report it): %v", e.name, err)
	}
	return rs, nil
}

// pushBack returns IDs that were taken for a caller who went away.
func (s *Server) pushBack(ctx context.Context, name string, ids []sequence.Range, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushBackTimeout)
	defer cancel()
	if err := s.seqs.Push(ctx, name, ids); err != nil {
		s.log.Warn().Err(err).Str("sequence", name).Int("ranges", len(ids)).Msg("could not push back the IDs of an abandoned request; they are lost, never reused")
		return
	}
	s.log.Debug().AnErr("cause", cause).Str("sequence", name).Msg("pushed back the IDs of an abandoned request")
}

// allocator returns the allocator of sequence name, creating it.
func (s *Server) allocator(name string) (*allocEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errShuttingDown
	}
	if e := s.allocs[name]; e != nil {
		return e, nil
	}
	a, err := sequence.NewAllocator(s.seqs, name, s.allocOpt)
	if err != nil {
		return nil, err
	}
	e := &allocEntry{name: name, alloc: a}
	s.allocs[name] = e
	return e, nil
}

// drop forgets the allocator of a sequence that does not exist, so that
// requests for made-up names do not accumulate allocators. It does not
// close it: a concurrent request still using it would get ErrClosed (503)
// instead of its own answer. An allocator that never took a batch holds no
// goroutine and no IDs.
func (s *Server) drop(e *allocEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.allocs[e.name] == e {
		delete(s.allocs, e.name)
	}
}

// IdempotencyKeyHeader is the request header of POST
// /v1/sequences/{name}/recycle that names one logical push (see
// sequence.ValidatePushKey), so that a retry after a timeout is answered
// definitively instead of recycling the IDs twice.
const IdempotencyKeyHeader = "Idempotency-Key"

// handleRecycle serves POST /v1/sequences/{name}/recycle. Only IDs that
// this replica handed out (and did not take back since) are accepted
// (handed.go); they go back to the sequence in ZooKeeper
// (sequence.Client.Push, or PushOnce with an Idempotency-Key), never into
// this replica's allocator, and the push refuses IDs that were never
// issued or are already recycled.
func (s *Server) handleRecycle(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := sequence.ValidateName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	keys, keyed := r.Header[http.CanonicalHeaderKey(IdempotencyKeyHeader)]
	key := ""
	if keyed {
		if len(keys) != 1 {
			badRequest(w, "%s: %d headers; send exactly one", IdempotencyKeyHeader, len(keys))
			return
		}
		key = keys[0]
		if err := sequence.ValidatePushKey(key); err != nil {
			badRequest(w, "%s: %v", IdempotencyKeyHeader, err)
			return
		}
	}
	ids, err := recycleRanges(http.MaxBytesReader(w, r.Body, maxBody), name)
	switch {
	case errors.Is(err, sequence.ErrBadPush):
		s.fail(w, r, err)
		return
	case err != nil:
		badRequest(w, "%v", err)
		return
	}
	retry := keyed && s.handed.knowsKey(name, key, ids)
	if !retry {
		if missing := s.handed.take(name, ids); len(missing) > 0 {
			s.refuseRecycle(w, r, name, key, ids, missing)
			return
		}
	}
	already := false
	if keyed {
		s.handed.rememberKey(name, key, ids)
		already, err = s.seqs.PushOnce(r.Context(), name, key, ids)
	} else {
		err = s.seqs.Push(r.Context(), name, ids)
	}
	if err != nil {
		if !retry && (errors.Is(err, sequence.ErrBadPush) || errors.Is(err, sequence.ErrUnknownSequence)) {
			s.handed.putBack(name, ids) // refused: nothing changed
		}
		s.fail(w, r, err)
		return
	}
	n := ids.Count()
	if !already {
		s.recycled.Add(n)
	}
	writeJSON(w, http.StatusOK, RecycleResponse{Sequence: name, Recycled: n, AlreadyApplied: already})
}

// refuseRecycle answers a recycle of IDs this replica did not hand out:
// 404 for a sequence that does not exist; 200 already_applied for the
// retry of a keyed recycle that another replica applied (the key is in the
// state: nothing is pushed); else 400 bad_push, naming the IDs.
func (s *Server) refuseRecycle(w http.ResponseWriter, r *http.Request, name, key string, ids, missing sequence.Ranges) {
	st, _, err := s.seqs.Describe(r.Context(), name)
	switch {
	case err != nil && !errors.Is(err, sequence.ErrCorrupt):
		s.fail(w, r, err)
	case key != "" && err == nil && slices.Contains(st.Pushed, key):
		writeJSON(w, http.StatusOK, RecycleResponse{Sequence: name, Recycled: ids.Count(), AlreadyApplied: true})
	default:
		s.fail(w, r, notHandedOut(name, missing))
	}
}

// handleList serves GET /v1/sequences.
// A page holds up to limit sequences (default DefaultListLimit, at most
// MaxListLimit) whose names start with prefix and whose health is health,
// after the opaque cursor of the previous page; next_cursor, when present,
// asks for the following page.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r.URL.RawQuery)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	page, next, err := ListPage(r.Context(), s.seqs, opts)
	if errors.Is(err, sequence.ErrUnknownSequence) {
		writeError(w, http.StatusNotFound, CodeUnknownSequence, "there are no sequences here yet (no root): create one with 'seqkeeper create NAME'")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body := ListResponse{Sequences: page}
	if next != "" {
		body.NextCursor = listCursor(next)
	}
	writeJSON(w, http.StatusOK, body)
}

// handleDescribe serves GET /v1/sequences/{name}.
func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request) {
	d, err := DescribeSequence(r.Context(), s.seqs, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleStatus serves GET /v1/status.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	q, err := statusQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if s.status == nil {
		writeJSON(w, http.StatusOK, map[string]any{"allocators": s.Allocators()})
		return
	}
	writeJSON(w, http.StatusOK, s.status(r.Context(), q))
}

// handleReady serves GET /readyz.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	var err error
	switch {
	case closed, s.draining.Load():
		err = errShuttingDown
	case s.ready != nil:
		err = s.ready(r.Context())
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}
