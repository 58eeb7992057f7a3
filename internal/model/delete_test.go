package model

import "github.com/seqkeeper/seqkeeper/internal/primary"

// deleteSequence deletes a sequence as 'seqkeeper delete' does: the
// tombstone first, then the znode. It is a variable so that the model can
// run against a tree without primary.Delete (set it to a stand-in there).
var deleteSequence = primary.Delete
