// Package client is the Go client of seqkeeper's HTTP API: for services
// that take IDs from the replicas' sidecar API instead of linking the
// ZooKeeper library (package sequence). It imports no ZooKeeper client and
// nothing of seqkeeper but two standard-library helpers (the retry
// policy, the allocator's settings).
//
// A Client spreads calls over a list of replica endpoints: a replica that
// answers 503 or does not answer is skipped for a while (exponential
// backoff with jitter, or the Retry-After it sent) and the call goes to the
// next. Errors the caller can act on come back at once, as *APIError values
// that match the sentinels below with errors.Is.
//
// The push rule: a recycle without an idempotency key whose answer was
// lost is never retried (it could return the IDs twice); it fails with
// ErrUncertain and the IDs count as lost. With a key (Recycle's key, and
// Allocator.Close always sends one) a retry on another replica is safe.
// A take whose answer was lost is retried: its IDs are lost, never handed
// out twice.
//
// An Allocator hands out single IDs from memory, fetching batches in the
// background, like sequence.Allocator:
//
//	c, err := client.New(client.Options{Endpoints: []string{"http://10.0.0.1:7070", "http://10.0.0.2:7070"}, Token: token})
//	a, err := client.NewAllocator(c, "orders", client.AllocatorOptions{})
//	id, err := a.Next(ctx)
//	...
//	err = a.Close(ctx) // pushes the unused IDs back
//
// With the replicas' admin token (http_admin_token) as Options.Token,
// Create and Delete register and delete sequences through the admin
// routes; the replica writes a deleted sequence's tombstone to the store
// before it leaves ZooKeeper.
package client
