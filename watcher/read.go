package watcher

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// readChunk is how many sequences readAll reads before it reports them: a
// full sync of 100,000 sequences holding every one's data at once kept 80
// bytes a sequence alive until the last was reported.
const readChunk = 1024

// readAll reads names with bounded parallelism, setting their data watches
// (notified through the event queue), and reports them in order of names.
func (w *Watcher) readAll(ctx context.Context, names []string) error {
	for len(names) > readChunk {
		if err := w.readSome(ctx, names[:readChunk]); err != nil {
			return err
		}
		names = names[readChunk:]
	}
	return w.readSome(ctx, names)
}

// readSome is readAll for at most readChunk names. It first sets the
// persistent watch of every name that has none on this connection, then
// reads them all, many per request: a change after a watch is set is
// notified, so what the read misses is reported next.
//
// Performance: a persistent watch (ZooKeeper 3.6's addWatch) stays set
// when it fires, so a notification is answered by a read that sets
// nothing, and the reads of a batch of notifications go out in multiRead
// requests of up to readBatch znodes, each costing the server about what
// one single read does. A one-shot watch would cost a read per change to
// set it again: under a load in which every take calls for a raise, two
// reads per raise, more than the take itself (docs/performance.md,
// "Raises and the pace of ZooKeeper").
func (w *Watcher) readSome(ctx context.Context, names []string) error {
	s := w.zk.Session()
	conn := w.zk.Connection()
	if err := w.arm(ctx, s, names); err != nil {
		return err
	}
	type batch struct {
		names []string
		reads []zkclient.Read
		err   error
	}
	var batches []*batch
	for rest := names; len(rest) > 0; {
		n := min(len(rest), readBatch)
		batches = append(batches, &batch{names: rest[:n]})
		rest = rest[n:]
	}
	parallel.Each(len(batches), w.opts.Parallelism/8, func(j int) {
		b := batches[j]
		paths := make([]string, len(b.names))
		for i, name := range b.names {
			paths[i] = w.root + "/" + name
		}
		b.reads, b.err = s.MultiRead(ctx, paths...)
	})
	if w.zk.Connection() != conn {
		// The watches were set on a connection that is gone, and the
		// server forgets persistent watches with it.
		return fmt.Errorf("reconnected while reading %d sequences", len(names))
	}
	for _, b := range batches {
		for i, name := range b.names {
			r := zkclient.Read{Err: b.err}
			if b.err == nil {
				r = b.reads[i]
			}
			if err := w.report(ctx, name, r.Data, r.Stat, r.Err); err != nil {
				return err
			}
		}
	}
	return nil
}

// readBatch is how many znodes one multiRead reads: a sequence's state is
// at most about 40 KB (a recycled list at its cap), and 32 of those fit
// the client's 1.5 MB buffer for one reply.
const readBatch = 32

// arm sets the persistent watch of each of names that has none set on the
// current connection, in parallel.
func (w *Watcher) arm(ctx context.Context, s zkclient.Session, names []string) error {
	errs := make([]error, len(names))
	parallel.Each(len(names), w.opts.Parallelism, func(i int) {
		if name := names[i]; !w.known[name].armed {
			if err := s.AddWatch(ctx, w.root+"/"+name, false); err != nil {
				errs[i] = fmt.Errorf("watch %s/%s: %w", w.root, name, err)
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			return err // one says it: on a lost connection, every watch fails alike
		}
	}
	return nil // report marks each name read as armed
}

// report emits what a read of name found, if it differs from what was
// reported before. After a read that succeeded the sequence's data watch
// is set: by that read, or by an earlier one whose watch has not fired
// (readSome set it again otherwise).
func (w *Watcher) report(ctx context.Context, name string, data []byte, stat *zkclient.Stat, err error) error {
	if errors.Is(err, zkclient.ErrNoNode) {
		if _, ok := w.known[name]; !ok {
			return nil
		}
		delete(w.known, name)
		return w.emit(ctx, Event{Kind: Removed, Name: name})
	}
	if err != nil {
		w.disarm(name)
		return fmt.Errorf("read %s/%s: %w", w.root, name, err)
	}
	m := meta{version: stat.Version, armed: true, czxid: stat.Czxid, mzxid: stat.Mzxid, data: maphash.Bytes(dataSeed, data)}
	old, ok := w.known[name]
	w.known[name] = m
	if ok && old.same(m) {
		return nil
	}
	kind := Changed
	if !ok {
		kind = Added
	}
	return w.emit(ctx, Event{Kind: kind, Name: name, Data: data, Version: stat.Version, Czxid: stat.Czxid, Mzxid: stat.Mzxid})
}

func (w *Watcher) emit(ctx context.Context, ev Event) error {
	select {
	case w.out <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
