package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
)

// The log. A store write (Put) adds one object: a segment at a free
// position of the log, created by a create-only conditional write, so two
// writers can never both take a position. Compact folds the segments into
// the bucket objects (the snapshot) by the same merge, then deletes them.
// A reader lists the log, reads every segment listed, and then the bucket
// objects.
//
// What holds, and why:
//
//   - A reader sees every write that completed before it began. The
//     listing is consistent (Backend.List), so it names every segment that
//     exists; a segment deleted between the listing and its read was folded
//     into the buckets before its deletion, and the buckets are read after
//     the segments, so the fold is seen instead. No object says where the
//     log ends: losing one (the epoch object) cannot hide a segment.
//   - The merge is a lattice (Merge), so folding a segment twice (a
//     compaction that crashed before its deletes), reading a segment and
//     its fold, or reading segments in any order changes nothing.
//   - Fencing. A writer reads the epoch object after every write: when a
//     newer leader epoch holds it, the write is reported fenced and nothing
//     is raised on its account. A newer primary's Seal appends a segment of
//     its own at the tail after reading the store, so a deposed writer that
//     reaches the tail collides with it and learns the newer epoch.

// logState is a Store's knowledge of the log. Segments are always read
// from the backend, never from memory: a reader must see a segment the
// store lost as lost (the primary's audit re-persists what it held).
type logState struct {
	// appendSem serialises this Store's appends (and finding the tail).
	appendSem chan struct{}
	// tail is the position the next append tries: 0 when unknown. Written
	// under appendSem.
	tail atomic.Int64
	// pending counts the segments this Store knows of that no compaction
	// of its own has folded yet.
	pending atomic.Int64
	// migrated is set once the meta and epoch objects are known to be of
	// this build's format.
	migrated bool
}

func newLogState() logState {
	return logState{appendSem: make(chan struct{}, 1)}
}

// Pending returns how many log segments this Store knows of that no
// compaction has folded: about what the next Compact would fold.
func (s *Store) Pending() int { return int(max(0, s.seglog.pending.Load())) }

// readSegment reads and checks the segment at pos.
func (s *Store) readSegment(ctx context.Context, l *layout, pos int64) (*segment, error) {
	key := segmentKey(pos)
	data, _, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	sg, err := decodeSegment(data)
	err = s.explain(ctx, err)
	if err == nil && sg.pos != pos {
		err = corruptf("holds position %d", sg.pos)
	}
	if err == nil {
		err = checkRoot(sg.root, l.root)
	}
	if err != nil {
		s.log.Error().Str("key", key).Err(err).Msg("store: unreadable log segment")
		return nil, fmt.Errorf("log segment %s: %w", key, err)
	}
	s.observeEpoch(sg.epoch)
	return sg, nil
}

// listLog returns the positions of the segments in the log, ascending.
func (s *Store) listLog(ctx context.Context) ([]int64, error) {
	keys, err := s.b.List(ctx, logPrefix)
	if err != nil {
		return nil, fmt.Errorf("list the log: %w", err)
	}
	pos := make([]int64, 0, len(keys))
	for _, k := range keys {
		if p, ok := segmentPos(k); ok {
			pos = append(pos, p)
		}
	}
	slices.Sort(pos)
	return pos, nil
}

// logView is one reading of the log: every segment that existed when it
// began and had not been folded and deleted by the time it was read, in
// position order.
type logView struct {
	segs []*segment
	last int64 // the highest position listed, 0 for an empty log
}

// readLog lists the log and reads every segment in it, in parallel.
func (s *Store) readLog(ctx context.Context, l *layout) (logView, error) {
	pos, err := s.listLog(ctx)
	if err != nil {
		return logView{}, err
	}
	got := make([]*segment, len(pos))
	errs := make([]error, len(pos))
	parallel.Each(len(pos), s.opts.Parallelism, func(i int) {
		got[i], errs[i] = s.readSegment(ctx, l, pos[i])
		if errors.Is(errs[i], ErrNotFound) {
			errs[i] = nil // folded and deleted since the listing
		}
	})
	if err := errors.Join(errs...); err != nil {
		return logView{}, err
	}
	v := logView{segs: slices.DeleteFunc(got, func(sg *segment) bool { return sg == nil })}
	if len(pos) > 0 {
		v.last = pos[len(pos)-1]
	}
	return v, nil
}

// readView reads the log, then calls buckets to read bucket objects: in
// that order, so that a segment deleted before it could be read is seen in
// the buckets it was folded into.
func (s *Store) readView(ctx context.Context, l *layout, buckets func() error) (logView, error) {
	v, err := s.readLog(ctx, l)
	if err != nil {
		return logView{}, err
	}
	if err := buckets(); err != nil {
		return logView{}, err
	}
	return v, nil
}

// ensureLog finds the tail of the log and, the first time, brings the meta
// and epoch objects to this build's format (after which an older seqkeeper
// refuses the store, ErrNewerFormat, instead of reading it without the
// records it cannot see). The caller holds appendSem.
func (s *Store) ensureLog(ctx context.Context, l *layout) error {
	if !s.seglog.migrated {
		if err := s.migrate(ctx); err != nil {
			return err
		}
		s.seglog.migrated = true
	}
	if s.seglog.tail.Load() > 0 {
		return nil
	}
	pos, err := s.listLog(ctx)
	if err != nil {
		return err
	}
	tail := int64(1)
	if len(pos) > 0 {
		tail = pos[len(pos)-1] + 1
	}
	s.seglog.tail.Store(tail)
	s.seglog.pending.Store(int64(len(pos)))
	return nil
}

// migrate rewrites the meta and epoch objects of an older format in this
// build's.
func (s *Store) migrate(ctx context.Context) error {
	// Read again, not from the layout: a replica of an older build may
	// have written the meta object since.
	if _, err := s.readMeta(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		ep, etag, err := s.readEpoch(ctx)
		if err != nil {
			return err
		}
		s.observeEpoch(ep.epoch)
		if etag == "" || ep.version == epochVersion {
			return nil // a missing object is written by the first epoch check
		}
		if err := s.recordRelease(ctx); err != nil {
			return err
		}
		_, err = s.b.Put(ctx, epochKey, encodeEpoch(ep), etag)
		if err == nil || !errors.Is(err, ErrConflict) {
			if err != nil {
				return fmt.Errorf("migrate the epoch object: %w", err)
			}
			return nil
		}
		if err := retry.Wait(ctx, attempt); err != nil {
			return fmt.Errorf("migrate the epoch object: %w", err)
		}
	}
}

// appendSegment writes sg at the log's tail for a writer of leader epoch
// sg.epoch and returns the segments of other writers it found at the
// positions it tried first. The caller holds appendSem. It returns nil only
// once the segment is in the log and the epoch object, read after the
// write, names no newer epoch.
func (s *Store) appendSegment(ctx context.Context, l *layout, sg *segment) ([]*segment, error) {
	var others []*segment
	sg.writer = rand.Uint64()
	sg.root = l.root
	if err := s.ensureLog(ctx, l); err != nil {
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
			other, rerr := s.readSegment(ctx, l, sg.pos)
			switch {
			case errors.Is(rerr, ErrNotFound):
				// Folded and deleted since: the tail is above it.
				s.seglog.tail.Store(sg.pos + 1)
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
			s.seglog.tail.Store(0)
			return others, err
		}
		s.seglog.tail.Store(sg.pos + 1)
		s.seglog.pending.Add(1)
		if err := s.confirmEpoch(ctx, sg.epoch); err != nil {
			return others, fmt.Errorf("%s written, but: %w", key, err)
		}
		return others, nil
	}
}
