package seqzk

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// MetaName is the name of the root's own znode, <root>/.seqkeeper. It is
// not a sequence: sequence names start with a letter or digit, and every
// reader of the root skips it. Its data is the root's era; its children
// are the ZooKeeper copies of tombstones, one per deleted name.
//
// Why ZooKeeper keeps a copy of each tombstone: the store must not be the
// only place that remembers a deletion, or the loss of one store object
// (or its rollback to an older version) could bring a deleted name back,
// or start it again below IDs it handed out. With the copy here, every
// fact is in two places while ZooKeeper keeps its data: a sequence's
// ceiling in its znode and the store, a deletion in its record here and
// the store. The primary's audit repairs either side from the other.
const MetaName = ".seqkeeper"

// Path returns the path of the root's own znode.
func (m Meta) Path() string { return m.c.metaPath() }

func (c *Client) metaPath() string { return c.opts.Root + "/" + MetaName }

// deletionPath is the path of the ZooKeeper copy of name's tombstone.
func (c *Client) deletionPath(name string) string { return c.metaPath() + "/" + name }

// Deletion is the ZooKeeper copy of a sequence's tombstone,
// <root>/.seqkeeper/<name>: every incarnation of the name that existed
// when it was written, and so every incarnation born before it, is
// deleted, and none of them handed out an ID above Ceiling. A sequence
// znode of the name that exists while the record does is a newer
// incarnation, born above Ceiling: 'seqkeeper delete' writes the record in
// the transaction that deletes the znode.
type Deletion struct {
	// Ceiling is the highest ID a deleted incarnation may have handed out.
	Ceiling int64
	// Exists is false when ZooKeeper holds no record for the name; Version
	// is the record's data version otherwise.
	Exists  bool
	Version int32
	// Mzxid is the zxid of the record's last write: a delete writes it in
	// the transaction that deletes the znode, so a znode of the name whose
	// creation zxid is above it was born after that delete.
	Mzxid int64
}

// BornAfter reports whether the znode created at zxid czxid was born after
// the deletion d records (in the same ZooKeeper history): then it is a
// newer incarnation, which d does not delete.
func (d Deletion) BornAfter(czxid int64) bool { return d.Exists && czxid > d.Mzxid }

// deletionHeader is the first line of a deletion record's data; the
// second is "ceiling <n>", so that an operator reading it in zkCli knows
// what it is.
const deletionHeader = "seqkeeper-deleted v1"

func encodeDeletion(ceiling int64) []byte { return encodeValue(deletionHeader, "ceiling", ceiling) }

func decodeDeletion(path string, data []byte) (int64, error) {
	v, ok := decodeValue(data, deletionHeader, "ceiling")
	if !ok || v < 0 {
		return 0, fmt.Errorf("%w: deletion record %s: %.60q is not %q and a ceiling", state.ErrCorrupt, path, data, deletionHeader)
	}
	return v, nil
}

// encodeValue is the data of a small seqkeeper znode: a header line, then
// "<key> <decimal>".
func encodeValue(header, key string, v int64) []byte {
	return []byte(header + "\n" + key + " " + strconv.FormatInt(v, 10) + "\n")
}

// decodeValue parses what encodeValue wrote, in that form only.
func decodeValue(data []byte, header, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(string(data), header+"\n"+key+" ")
	n, ok2 := strings.CutSuffix(rest, "\n")
	v, err := strconv.ParseInt(n, 10, 64)
	return v, ok && ok2 && err == nil && strconv.FormatInt(v, 10) == n
}

// ReadDeletion returns the ZooKeeper copy of name's tombstone
// (Exists false when there is none).
func (m Meta) ReadDeletion(ctx context.Context, name string) (Deletion, error) {
	c := m.c
	p := c.deletionPath(name)
	data, stat, err := c.zk.Session().Get(ctx, p)
	c.stats.requests.Add(1)
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		return Deletion{}, nil
	case err != nil:
		return Deletion{}, fmt.Errorf("read the deletion record %s: %w", p, err)
	}
	return deletionOf(p, data, stat)
}

// deletionOf is the deletion record at p read as data and stat.
func deletionOf(p string, data []byte, stat *zkclient.Stat) (Deletion, error) {
	k, err := decodeDeletion(p, data)
	if err != nil {
		return Deletion{}, err
	}
	return Deletion{Ceiling: k, Exists: true, Version: stat.Version, Mzxid: stat.Mzxid}, nil
}

// Deletions returns every deletion record of the root, by name. A root
// without its own znode has none.
func (m Meta) Deletions(ctx context.Context) (map[string]Deletion, error) {
	c := m.c
	names, _, err := c.zk.Session().Children(ctx, c.metaPath())
	c.stats.requests.Add(1)
	if errors.Is(err, zkclient.ErrNoNode) {
		return map[string]Deletion{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the deletion records under %s: %w", c.metaPath(), err)
	}
	out := make(map[string]Deletion, len(names))
	for _, name := range names {
		d, err := c.Meta().ReadDeletion(ctx, name)
		if err != nil {
			return nil, err
		}
		if d.Exists {
			out[name] = d
		}
	}
	return out, nil
}

// deletionOps returns the operations that record, in a transaction, that
// name is deleted up to ceiling: create the record, or raise it (never
// lower it) at the version d was read at, so that the transaction fails if
// another record was written meanwhile.
func (c *Client) deletionOps(ctx context.Context, name string, ceiling int64, d Deletion) []zkclient.Op {
	if d.Exists {
		return []zkclient.Op{zkclient.SetOp(c.deletionPath(name), encodeDeletion(max(ceiling, d.Ceiling)), d.Version)}
	}
	return []zkclient.Op{c.createOp(ctx, KindRecord, c.deletionPath(name), encodeDeletion(ceiling), 0)}
}

// guardOps returns the operations that make a transaction that births an
// incarnation of name (creates its znode, or initialises a registration)
// fail unless name's deletion record is still as d says: no deletion that
// happened after the caller read it (and chose the floor of the new
// incarnation) can be overtaken. Absence is checked by creating and
// deleting the record in the same transaction.
func (c *Client) guardOps(name string, d Deletion) []zkclient.Op {
	p := c.deletionPath(name)
	if d.Exists {
		return []zkclient.Op{zkclient.CheckOp(p, d.Version)}
	}
	return []zkclient.Op{zkclient.CreateOp(p, nil, 0), zkclient.DeleteOp(p, 0)}
}

// buryAbsent is the step that records name deleted up to ceiling while no
// znode of it exists: the death of a name only the store, or another
// root, knew.
func (c *Client) buryAbsent(h Holding, ceiling int64) (Step, error) {
	switch {
	case h.Exists:
		return Step{}, fmt.Errorf("sequence %q %w: its deletion record is written only while no znode of the name exists", h.Name, ErrExists)
	case h.Deletion.Exists && h.Deletion.Ceiling >= ceiling:
		return Step{}, nil
	}
	dead := max(ceiling, h.Deletion.Ceiling, 1)
	return Step{Change: Change{Dead: dead}, After: tombstone(h.Name, dead)}, nil
}

// Bury records in ZooKeeper that name, absent there, handed out no ID
// above ceiling: the death of a name only the store, or another root,
// knew, by the lifecycle protocol. Its deletion record is written (or
// raised, never lowered) in a transaction guarded by the name's absence;
// the caller then writes the store's tombstone, if the store lacks it (an
// import of another root's tombstone). It fails with ErrExists, nothing
// written, while a znode of the name exists (an incarnation the record
// would wrongly claim to be newer than it).
func (m Meta) Bury(ctx context.Context, name string, ceiling int64) error {
	c := m.c
	_, err := c.Keeper().Lifecycle(ctx, nil, name, func(h Holding, _ persist.Record) (Step, error) { return c.buryAbsent(h, ceiling) })
	return err
}

// EnsureMeta creates the root and its own znode when they are missing (a
// read when they exist).
func (m Meta) EnsureMeta(ctx context.Context) error {
	c := m.c
	if err := c.ensure(ctx, KindMeta, c.metaPath()); err != nil {
		return fmt.Errorf("create %s: %w", c.metaPath(), err)
	}
	return nil
}

// Era identifies a stretch of ZooKeeper's history in which it cannot have
// lost data: it changes whenever ZooKeeper's epoch does, and every leader
// election, the one after a restore from an older copy included, starts a
// new epoch. The primary records in the store the era in which it last saw
// each sequence present (persist.Record.Seen); a sequence missing from
// ZooKeeper in the era it was seen in was deleted, not lost, and is not
// restored. Its value is the epoch in its high 32 bits and 32 random bits
// below (an epoch number can come back after a restore from an older copy;
// the random part does not).
type Era struct {
	// Value is the era, 0 when the root has none (never set, or ZooKeeper
	// lost it with the root's data).
	Value int64
	// Epoch is the ZooKeeper epoch the era was set in.
	Epoch int64
	// Exists reports whether the root's own znode exists, and Version is
	// its data version.
	Exists  bool
	Version int32
}

// eraHeader is the first line of the root's own znode's data; the second
// is "era <n>".
const eraHeader = "seqkeeper-root v1"

func encodeEra(value int64) []byte { return encodeValue(eraHeader, "era", value) }

// ReadEra returns the root's era. Empty data (the znode created by a
// delete before any primary set an era) is no era; data that is not an era
// is ErrCorrupt.
func (m Meta) ReadEra(ctx context.Context) (Era, error) {
	c := m.c
	data, stat, err := c.zk.Session().Get(ctx, c.metaPath())
	c.stats.requests.Add(1)
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		return Era{}, nil
	case err != nil:
		return Era{}, fmt.Errorf("read %s: %w", c.metaPath(), err)
	}
	e := Era{Exists: true, Version: stat.Version}
	if len(data) == 0 {
		return e, nil
	}
	v, ok := decodeValue(data, eraHeader, "era")
	if !ok || v <= 0 {
		return Era{}, fmt.Errorf("%w: %s holds %.60q, not %q and an era", state.ErrCorrupt, c.metaPath(), data, eraHeader)
	}
	e.Value, e.Epoch = v, v>>32
	return e, nil
}

// CurrentEra returns the root's era for ZooKeeper epoch epoch, setting a
// new one first when the root has none or its era is of another epoch
// (the root's own znode is created if missing). The primary calls it when
// it starts and whenever it sees a new epoch, before it restores anything.
func (m Meta) CurrentEra(ctx context.Context, epoch int64) (Era, error) {
	c := m.c
	if err := c.Meta().EnsureMeta(ctx); err != nil {
		return Era{}, err
	}
	for attempt := 0; ; attempt++ {
		e, err := c.Meta().ReadEra(ctx)
		if err != nil {
			return Era{}, err
		}
		if e.Value != 0 && e.Epoch == epoch {
			return e, nil
		}
		var b [4]byte
		if _, err := crand.Read(b[:]); err != nil {
			panic("seqzk: crypto/rand failed: " + err.Error())
		}
		next := epoch<<32 | int64(binary.BigEndian.Uint32(b[:])|1)
		res, err := c.write(ctx, zkclient.SetOp(c.metaPath(), encodeEra(next), e.Version))
		switch {
		case err == nil:
			return Era{Value: next, Epoch: epoch, Exists: true, Version: res[0].Stat.Version}, nil
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), zkclient.IsTransient(err):
			if attempt >= 10 {
				return Era{}, fmt.Errorf("set the era of %s: %w", c.opts.Root, err)
			}
			if errors.Is(err, zkclient.ErrNoNode) {
				if err := c.Meta().EnsureMeta(ctx); err != nil {
					return Era{}, err
				}
			}
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return Era{}, err
			}
		default:
			return Era{}, fmt.Errorf("set the era of %s: %w", c.opts.Root, err)
		}
	}
}

// Lost reports whether a sequence missing from ZooKeeper, last seen
// present in era seen (persist.Record.Seen), may have been lost with
// ZooKeeper's data rather than deleted: the root has no era (its data was
// lost, or no primary of this release ran yet), the era is not of the
// current epoch (an election since), or the sequence was last seen in an
// earlier era. Only such a sequence is restored.
func (e Era) Lost(seen, epoch int64) bool {
	return e.Value == 0 || e.Epoch != epoch || seen != e.Value
}
