package primary

import (
	"context"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// The store buries deleted sequences.
var _ seqzk.Tombstoner = (*persist.Store)(nil)

// ErrDeleteContended reports a Delete that gave up because the sequence
// kept changing under it. The tombstone is written; the znode is not
// deleted yet.
var ErrDeleteContended = seqzk.ErrDeleteContended

// Delete deletes sequence name for good, with the tombstone in store
// first: see seqzk.Client.Delete.
func Delete(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string) (int64, error) {
	return seqs.Delete(ctx, name, store)
}

// TombstoneCeiling is the highest ID a sequence in state st may have
// issued: see seqzk.TombstoneCeiling.
func TombstoneCeiling(st state.State) int64 { return seqzk.TombstoneCeiling(st) }
