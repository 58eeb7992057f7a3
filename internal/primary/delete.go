package primary

import (
	"context"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
)

// Delete deletes sequence name for good, for an operator: a death of the
// lifecycle protocol, ZooKeeper first and then the tombstone in store
// (seqzk.Operator.Delete).
func Delete(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string) (int64, error) {
	return seqs.Operator().Delete(ctx, name, store)
}
