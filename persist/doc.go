// Package persist is seqkeeper's durable store: the place a sequence's
// reserved ceiling is written before any ID under it may be handed out, and
// from which every counter is restored after ZooKeeper loses its data.
//
// # The seam
//
// Backend is a conditional object store: Get, a create-only or If-Match
// Put, Delete, List and String. Two real implementations live
// here: S3Backend (any S3-compatible server, conditional writes with
// If-None-Match: * and If-Match) and FileBackend (one directory, for a single
// host or development: a lock file, atomic rename, fsync). Both pass one
// conformance suite. Open picks one from a store URL (s3://... or
// file:///...).
//
// # The store
//
// Store keeps a Record per sequence on top of any Backend, as a snapshot and
// a log. The snapshot spreads records over a fixed number of bucket objects
// (fnv-1a of the name), each a small versioned header and a gzip-compressed,
// sorted list, so 100,000 sequences are a few hundred objects read in
// parallel rather than 100,000 GETs. A store write (Put) does not rewrite
// the buckets its records live in: it creates one new object, a log segment
// at the next free position, and Compact folds segments into the buckets in
// the background. The layout:
//
//	meta               format version, bucket count and sequences root,
//	                   written once (rebuilt from a bucket's header if lost)
//	epoch              the leader epoch, advanced by conditional write
//	                   (repaired after a write if lost)
//	buckets/<hex id>   the records of every name that hashes to the bucket
//	log/<hex position> one store write's records (see log.go)
//	release            the seqkeeper release that wrote the formats, named
//	                   when an older build refuses one (release.go)
//
// Readers find the log by listing it (Backend.List), so no object points
// at another and losing any one object loses only the records it alone
// held. A Record is a lattice: every write, read and fold joins records
// by maximum (Merge), so the order in which objects are written, read,
// folded or repeated cannot change what the store returns. Compact folds
// the segments into the buckets, then deletes them.
//
// A store of an older format is read as it is and migrated on the first
// write (the epoch object's checkpoint of format v2 is ignored: the log is
// listed); a format newer than this seqkeeper knows is refused
// (ErrNewerFormat, a NewerFormatError naming the release that wrote it
// when the store records it) rather than read in part.
//
// # What holds
//
//   - A stored ceiling never decreases. Every write merges by max and is
//     conditional on the ETag read, so two writers (a deposed primary and its
//     successor) can interleave in any order and the higher ceiling stays.
//   - Fencing: every bucket object and log segment carries the leader epoch
//     of its writer. A writer whose epoch is lower than one it finds in an
//     object gets ErrFenced; a writer reads the epoch object after every
//     write, and reports a write fenced (nothing may be raised on its
//     account) when a newer epoch holds it.
//   - A corrupt, truncated or unknown object is an error that names it
//     (ErrCorrupt, ErrNewerFormat), never an empty bucket or a zero ceiling,
//     and is never overwritten.
//
// # What does not
//
//   - A Put is all or nothing (one segment), but a Put whose error is not a
//     validation error may have landed, fenced ones included: the merge
//     keeps that safe, and Seal makes a successor's view complete.
//   - A corrupt log segment fails every read and write that reaches it: it
//     could hold any sequence's ceiling. The error names it; an operator
//     must repair or remove it.
//   - A corrupt bucket object stops compaction (no segment is deleted while
//     a fold fails), so the log grows until an operator repairs it; reads
//     stay correct.
//   - The store cannot tell a lost bucket object from one never written: S3
//     does not lose objects, and an empty store is reported as empty.
//     Telling a wiped or replaced store (or ZooKeeper ensemble) from a new
//     one is the cluster marker's job, not this package's.
package persist
