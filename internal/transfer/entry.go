// Package transfer moves every sequence of a root between ZooKeeper
// ensembles and stores: Export writes them as JSON lines, Import reads
// them into a root (the one behind 'seqkeeper export' and 'seqkeeper
// import'). Import never moves a counter backwards and never brings back a
// deleted name; a sequence it creates starts above the exported ceiling,
// with its new ceiling written to the store before ZooKeeper.
package transfer

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Version is the format version an export's header line carries.
const Version = 1

// Header is the first line of an export.
type Header struct {
	// SeqkeeperExport is the format version (Version).
	SeqkeeperExport int `json:"seqkeeper_export"`
	// Root is the sequences root exported, for the reader's information.
	Root string `json:"root"`
	// ExportedAt is when the export started (RFC 3339).
	ExportedAt string `json:"exported_at"`
}

// Entry is one line after the header: a sequence or a tombstone.
type Entry struct {
	Name string `json:"name"`
	// Deleted marks a tombstone: the name was deleted and must never hand
	// out an ID up to Ceiling again.
	Deleted bool `json:"deleted"`
	// Legacy marks a bare 8-byte counter: Next is the counter.
	Legacy bool `json:"legacy"`
	// Registered marks a sequence the primary had not initialised yet.
	Registered bool `json:"registered"`
	// Next is the next ID the counter would hand out.
	Next int64 `json:"next"`
	// Ceiling is the highest ID the sequence may have handed out: the
	// higher of ZooKeeper's ceiling and the store's.
	Ceiling int64 `json:"ceiling"`
	// Start and End bound the sequence's IDs; Windows is its window slots.
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	Windows int   `json:"windows"`
	// Recycled are IDs pushed back and not handed out again yet, as
	// [start, end] pairs. Import does not restore them: see Import.
	Recycled [][2]int64 `json:"recycled"`
}

// check returns what is wrong with e, or nil.
func (e Entry) check() error {
	if err := seqzk.ValidateName(e.Name); err != nil {
		return err
	}
	if e.Ceiling < 0 {
		return fmt.Errorf("ceiling %d is negative", e.Ceiling)
	}
	if e.Deleted || e.Legacy {
		return nil
	}
	last := min(e.End, state.MaxID-1)
	switch {
	case e.Start < 1 || e.End < e.Start:
		return fmt.Errorf("space %d:%d: want 1 <= start <= end", e.Start, e.End)
	case e.Windows < 0 || e.Windows > state.MaxWindows:
		return fmt.Errorf("windows %d: want 0 to %d", e.Windows, state.MaxWindows)
	case e.Next < e.Start || e.Next > last+1:
		return fmt.Errorf("next %d is outside its space %d:%d", e.Next, e.Start, e.End)
	case !e.Registered && e.Ceiling < e.Next-1:
		return fmt.Errorf("ceiling %d is below next-1 (%d)", e.Ceiling, e.Next-1)
	}
	for _, r := range e.Recycled {
		if r[0] > r[1] || r[0] < e.Start || r[1] >= e.Next {
			return fmt.Errorf("recycled range %d:%d is not within the issued IDs %d:%d", r[0], r[1], e.Start, e.Next-1)
		}
	}
	return nil
}

// from is the first ID the sequence may hand out in a root it is imported
// into: above everything the export covers.
func (e Entry) from() int64 {
	if e.Ceiling == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(e.Ceiling+1, e.Start)
}

// entryOf is the export line of a sequence in state st, whose record in the
// store (if stored) is rec.
func entryOf(st state.State, storedCeiling int64) Entry {
	e := Entry{Name: st.Name, Legacy: st.Legacy, Registered: st.Registered, Next: st.Next,
		Ceiling: max(st.Ceiling, storedCeiling), Start: st.Start, End: st.End, Windows: st.Windows,
		Recycled: [][2]int64{}}
	switch {
	case st.Legacy:
		e.Ceiling = max(st.Next, storedCeiling)
		e.Start, e.End = 0, 0
	case st.Registered:
		e.Next = st.Start
		e.Ceiling = max(st.Start-1, storedCeiling)
	}
	for _, r := range st.Recycled {
		e.Recycled = append(e.Recycled, [2]int64{r.Start, r.End})
	}
	return e
}

func marshalLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}
