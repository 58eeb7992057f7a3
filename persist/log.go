package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// The log. A store write (Put) adds one object: a segment at the next free
// position of the log, created by a create-only conditional write, so two
// writers can never both take a position. Compact folds the segments into
// the bucket objects (the snapshot) by the same merge as ever, then raises
// the checkpoint in the epoch object and deletes the folded segments. A
// reader takes the buckets and every segment above the checkpoint.
//
// What holds, and why:
//
//   - Positions above the checkpoint are dense. A writer takes position p
//     only once it has seen p-1 (written, read, or refused its own write
//     there), and a segment is deleted only once a durable checkpoint covers
//     it. So a reader walking up from checkpoint+1 to the first missing
//     position has read every segment above the checkpoint, unless a
//     compaction moved the checkpoint meanwhile: readers check that it did
//     not (readView).
//   - A segment is never lost. A writer whose view of the tail is stale can
//     create a segment at a position a compaction has already deleted; it
//     reads the checkpoint after every write and, if it covers its
//     position, writes the records again at the tail (appendSegment). Any
//     deletion of a position is preceded by a checkpoint that covers it, so
//     that read cannot miss it.
//   - Fencing. A writer reads the epoch object after every write: when a
//     newer leader epoch holds it, the write is reported fenced and nothing
//     is raised on its account. A newer primary's Seal appends a segment of
//     its own at the tail after reading the store, so a deposed writer that
//     reaches the tail collides with it and learns the newer epoch.
//   - The merge is by max and idempotent, so folding a segment twice (a
//     compaction that crashed before its checkpoint, a reader that sees a
//     segment and its fold) changes nothing.

// logState is a Store's knowledge of the log. Segments are always read
// from the backend, never from memory: a reader must see a segment the
// store lost as lost (the primary's audit re-persists what it held).
type logState struct {
	// appendSem serialises this Store's appends (and finding the tail).
	appendSem chan struct{}
	// tail is the position the next append tries: 0 when unknown. Written
	// under appendSem.
	tail atomic.Int64

	mu    sync.Mutex
	ckpt  int64 // the highest checkpoint seen
	swept int64 // every segment at or below it is known deleted
}

func newLogState() logState {
	return logState{appendSem: make(chan struct{}, 1)}
}

// noteCheckpoint records a checkpoint read from the epoch object.
func (l *logState) noteCheckpoint(ep epochState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.swept = max(l.swept, ep.swept)
	l.ckpt = max(l.ckpt, ep.checkpoint)
}

// Pending returns how many log segments this Store knows of above the last
// checkpoint it read: about what the next Compact would fold.
func (s *Store) Pending() int {
	s.seglog.mu.Lock()
	defer s.seglog.mu.Unlock()
	return int(max(0, s.seglog.tail.Load()-1-s.seglog.ckpt))
}

// readSegment reads and checks the segment at pos.
func (s *Store) readSegment(ctx context.Context, pos int64) (*segment, error) {
	key := segmentKey(pos)
	data, _, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	sg, err := decodeSegment(data)
	if err == nil && sg.pos != pos {
		err = corruptf("holds position %d", sg.pos)
	}
	if err != nil {
		s.log.Error().Str("key", key).Err(err).Msg("store: unreadable log segment")
		return nil, fmt.Errorf("log segment %s: %w", key, err)
	}
	s.observeEpoch(sg.epoch)
	return sg, nil
}

// readSegments returns the run of segments from position from up to the
// first missing one, in order, read in parallel batches that grow from one
// (most tails are short).
func (s *Store) readSegments(ctx context.Context, from int64) ([]*segment, error) {
	var out []*segment
	pos, batch := from, 1
	for {
		got := make([]*segment, batch)
		errs := make([]error, batch)
		each(batch, s.opts.Parallelism, func(i int) {
			got[i], errs[i] = s.readSegment(ctx, pos+int64(i))
		})
		for i := range batch {
			if errors.Is(errs[i], ErrNotFound) {
				return out, nil
			}
			if errs[i] != nil {
				return nil, errs[i]
			}
			out = append(out, got[i])
		}
		pos += int64(batch)
		batch = min(2*batch, s.opts.Parallelism)
	}
}

// logView is one consistent reading of the log: the epoch object and every
// segment above its checkpoint.
type logView struct {
	ep   epochState
	etag string
	segs []*segment
}

func (v *logView) end() int64 { return v.ep.checkpoint + int64(len(v.segs)) }

// readLog reads the epoch object and the segments above its checkpoint.
func (s *Store) readLog(ctx context.Context) (logView, error) {
	ep, etag, err := s.readEpoch(ctx)
	if err != nil {
		return logView{}, err
	}
	s.observeEpoch(ep.epoch)
	s.seglog.noteCheckpoint(ep)
	segs, err := s.readSegments(ctx, ep.checkpoint+1)
	if err != nil {
		return logView{}, err
	}
	return logView{ep: ep, etag: etag, segs: segs}, nil
}

// viewAttempts bounds how often a reader starts again because a compaction
// moved the checkpoint while it read.
const viewAttempts = 8

// readView reads the log, then calls buckets to read bucket objects, then
// checks that the checkpoint did not move meanwhile (a compaction may have
// deleted segments the reader had not reached yet, after folding them into
// buckets it had already read); if it did, it starts again.
func (s *Store) readView(ctx context.Context, buckets func() error) (logView, error) {
	for attempt := 0; attempt < viewAttempts; attempt++ {
		v, err := s.readLog(ctx)
		if err != nil {
			return logView{}, err
		}
		if err := buckets(); err != nil {
			return logView{}, err
		}
		ep, _, err := s.readEpoch(ctx)
		if err != nil {
			return logView{}, err
		}
		s.seglog.noteCheckpoint(ep)
		if ep.checkpoint == v.ep.checkpoint {
			return v, nil
		}
		s.log.Debug().Int64("checkpoint", ep.checkpoint).Msg("store: a compaction ran while reading; reading again")
	}
	return logView{}, fmt.Errorf("a compaction moved the log's checkpoint during each of %d reads; try again", viewAttempts)
}

// ensureLog makes the epoch object the log format's (a store of the bucket
// layout is migrated: its log is empty) and finds the tail. The caller
// holds appendSem.
func (s *Store) ensureLog(ctx context.Context) error {
	if s.seglog.tail.Load() > 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		ep, etag, err := s.readEpoch(ctx)
		if err != nil {
			return err
		}
		s.observeEpoch(ep.epoch)
		if ep.version < epochVersion {
			// A store of the bucket layout (or a new one). From this
			// write on, a seqkeeper that knows only buckets refuses the
			// store (ErrNewerFormat) instead of missing the log.
			_, err := s.b.Put(ctx, epochKey, encodeEpoch(ep), etag)
			if errors.Is(err, ErrConflict) {
				if err := retry.Wait(ctx, attempt); err != nil {
					return fmt.Errorf("migrate the epoch object to the log format: %w", err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("migrate the epoch object to the log format: %w", err)
			}
			s.log.Info().Int64("epoch", ep.epoch).Msg("store: the store now keeps a log (format v2); seqkeeper builds before it can no longer use it")
		}
		s.seglog.noteCheckpoint(ep)
		segs, err := s.readSegments(ctx, ep.checkpoint+1)
		if err != nil {
			return err
		}
		s.seglog.tail.Store(ep.checkpoint + int64(len(segs)) + 1)
		return nil
	}
}

// appendSegment writes sg at the log's tail for a writer of leader epoch
// sg.epoch and returns the segments of other writers it found at the
// positions it tried first. The caller holds appendSem. It returns nil only
// once the segment is in the log above the checkpoint and the epoch object,
// read after the write, still names no newer epoch.
func (s *Store) appendSegment(ctx context.Context, sg *segment) ([]*segment, error) {
	var others []*segment
	sg.writer = rand.Uint64()
	if err := s.ensureLog(ctx); err != nil {
		return others, err
	}
	for {
		sg.pos = s.seglog.tail.Load()
		key := segmentKey(sg.pos)
		data, err := encodeSegment(sg)
		if err != nil {
			return others, fmt.Errorf("%s: encode: %w", key, err)
		}
		_, err = s.b.Put(ctx, key, data, "")
		if errors.Is(err, ErrConflict) {
			other, rerr := s.readSegment(ctx, sg.pos)
			switch {
			case errors.Is(rerr, ErrNotFound):
				// Deleted since: the position was below a checkpoint,
				// so the tail is above it. Find it again.
				s.seglog.tail.Store(0)
				if err := s.ensureLog(ctx); err != nil {
					return others, err
				}
				continue
			case rerr != nil:
				return others, rerr
			case other.writer == sg.writer:
				err = nil // ours: an earlier attempt landed
			case other.epoch > sg.epoch:
				return others, fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, other.epoch, sg.epoch)
			default:
				others = append(others, other)
				s.seglog.tail.Store(sg.pos + 1)
				continue
			}
		}
		if err != nil {
			// The write may have landed; a later write finds out (it
			// collides with it, and the merge makes a repeat harmless).
			return others, err
		}
		s.seglog.tail.Store(sg.pos + 1)

		start := s.now()
		ep, _, err := s.readEpoch(ctx)
		if err != nil {
			return others, fmt.Errorf("%s written, but the epoch object could not be read to confirm it: %w", key, err)
		}
		s.observeEpoch(ep.epoch)
		s.epochRead.Store(start)
		s.seglog.noteCheckpoint(ep)
		if ep.epoch > sg.epoch {
			return others, fmt.Errorf("%s: %w: leader epoch %d holds the store; this writer holds epoch %d", key, ErrFenced, ep.epoch, sg.epoch)
		}
		if ep.checkpoint >= sg.pos {
			// A compaction had folded and deleted this position: the
			// segment would never be read. Write it again at the tail.
			s.log.Warn().Str("key", key).Int64("checkpoint", ep.checkpoint).Msg("store: wrote below the log's checkpoint (a stale view of the tail); writing again at the tail")
			if err := s.b.Delete(ctx, key); err != nil { // nobody reads it
				s.log.Warn().Str("key", key).Err(err).Msg("store: could not delete a segment below the checkpoint; it is harmless")
			}
			s.seglog.tail.Store(0)
			if err := s.ensureLog(ctx); err != nil {
				return others, err
			}
			sg.writer = rand.Uint64()
			continue
		}
		return others, nil
	}
}
