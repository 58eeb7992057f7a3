// Package httpapi is the HTTP ID API every seqkeeper replica serves, so that
// programs in any language can take IDs from a sidecar on localhost.
//
// Routes (the contract is docs/http-api.md):
//
//	POST /v1/sequences/{name}/ids?count=N     take N IDs (default 1, at most Options.MaxCount)
//	POST /v1/sequences/{name}/recycle         give IDs back: {"ranges":[[start,end],...]}
//	GET  /v1/sequences                        every sequence, summarised
//	GET  /v1/sequences/{name}                 one sequence in detail
//	GET  /v1/status                           Options.Status
//	GET  /livez, /healthz                     the process is alive
//	GET  /readyz                              Options.Ready
//	GET  /metrics                             Prometheus
//
// IDs are served from one in-memory sequence.Allocator per sequence (hi-lo):
// while the allocator holds IDs, a request costs a few atomic operations and
// no ZooKeeper round trip, and the allocator refills in the background. A
// request for N IDs pulls N IDs from the allocator and answers them as
// ascending, coalesced ranges [[start,end],...].
//
// Errors are JSON, {"error":{"code":"...","message":"..."}}, with a stable
// code (the Code constants) and the status that fits: 400 for bad input,
// 401 for a missing token, 404 for an unknown sequence, 409 when a
// sequence's ID space is used up, 503 (with Retry-After) when the sequence
// is at its reserved ceiling or ZooKeeper is unavailable.
//
// # What is guaranteed and what is not
//
//   - An ID answered by one replica is never answered again by any replica
//     (the sequence package's guarantee).
//   - An answer may hold fewer IDs than asked for when the sequence reaches
//     its ceiling midway: the IDs already pulled are answered, not dropped.
//     Sum the ranges; do not assume N.
//   - IDs handed out in an answer the caller never reads (a dropped
//     connection after the answer was written) are lost, never reused.
//   - A crashed replica loses the unused IDs its allocators hold (at most
//     two batches per sequence); Close, called at graceful shutdown, pushes
//     them back and loses none.
//   - Recycle returns IDs to the sequence in ZooKeeper, where the next take
//     by any client finds them. It refuses IDs never issued or already
//     recycled, but it cannot tell IDs a caller never received from IDs it
//     did: recycle only IDs you took and will not use. A recycle without an
//     Idempotency-Key header must never be retried after a timeout (the
//     first may have landed; treat the IDs as lost); with one, a retry is
//     answered 200 with "already_applied" when the first landed.
//   - IDs are unique, not ordered: concurrent callers, recycled IDs and
//     windows mean a later answer may hold lower IDs.
package httpapi
