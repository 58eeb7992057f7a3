// Package persist is seqkeeper's durable store: the place a sequence's
// reserved ceiling is written before any ID under it may be handed out, and
// from which every counter is restored after ZooKeeper loses its data.
//
// # The seam
//
// Backend is a conditional object store with three methods: Get, a
// create-only or If-Match Put, and String. Two real implementations live
// here: S3Backend (any S3-compatible server, conditional writes with
// If-None-Match: * and If-Match) and FileBackend (one directory, for a single
// host or development: a lock file, atomic rename, fsync). Both pass one
// conformance suite. Open picks one from a store URL (s3://... or
// file:///...).
//
// # The store
//
// Store keeps a Record per sequence on top of any Backend. Records are spread
// over a fixed number of bucket objects (fnv-1a of the name), each a small
// versioned header and a gzip-compressed, sorted list, so 100,000 sequences
// are a few hundred objects read in parallel rather than 100,000 GETs, and a
// raise rewrites one small object. The layout:
//
//	meta               format version and bucket count, written once
//	epoch              the leader epoch, advanced by conditional write
//	buckets/<hex id>   the records of every name that hashes to the bucket
//
// # What holds
//
//   - A stored ceiling never decreases. Every write merges by max and is
//     conditional on the ETag read, so two writers (a deposed primary and its
//     successor) can interleave in any order and the higher ceiling stays.
//   - Fencing: every bucket object carries the highest leader epoch of its
//     writers. A writer whose epoch is lower than one it finds in a bucket or
//     in the epoch object gets ErrFenced and writes nothing to that bucket.
//   - A corrupt, truncated or unknown object is an error that names it
//     (ErrCorrupt, ErrNewerFormat), never an empty bucket or a zero ceiling,
//     and is never overwritten.
//
// # What does not
//
//   - Put is atomic per bucket object, not across them: S3 has no
//     multi-object transaction. When a Put spanning several buckets fails,
//     the buckets already written stay written. Every write is a monotone
//     merge, so that never lowers anything, but callers must not assume all
//     or nothing.
//   - Fencing is checked against the epoch object at most every
//     StoreOptions.EpochCheckInterval (and after every write conflict). Until
//     then a deposed primary may still raise ceilings in buckets its
//     successor has not written; the merge keeps that safe, and it stops at
//     the next check.
//   - The store cannot tell a lost bucket object from one never written: S3
//     does not lose objects, and an empty store is reported as empty.
//     Telling a wiped or replaced store (or ZooKeeper ensemble) from a new
//     one is the cluster marker's job, not this package's.
package persist
