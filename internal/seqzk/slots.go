package seqzk

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Which slot a client takes from (see windows.go): its own, an empty one,
// or the one written longest ago.

// openEmptySlot carves the first window of an empty slot of sequence name
// (prefer if it is empty) and makes it this client's slot, if the
// sequence has fewer windows than slots: a slot of its own is better than
// sharing one (a new sequence whose first windows the primary has not
// carved yet, a slot used up at the ceiling and pruned). It reports
// whether the slot has a window now.
func (c *Client) openEmptySlot(ctx context.Context, name string, seq *node, slots, prefer int) bool {
	seq.mu.Lock()
	windows := seq.windows
	seq.mu.Unlock()
	slot, ok := emptySlot(windows, slots, prefer)
	if !ok || !c.refill(ctx, name, slot, "", 0, 0) {
		return false
	}
	seq.preferred.Store(int64(slot) + 1)
	return true
}

// emptySlot returns a slot of the slots 0 to slots-1 that has no window
// among windows: prefer if it is one, else one picked at random. It finds
// none while there are as many windows (counting those opened outside the
// slots once each) as slots.
func emptySlot(windows []string, slots, prefer int) (int, bool) {
	has := make([]bool, slots)
	groups := 0
	for i, w := range windows {
		k := windowSlot(w)
		if i == 0 || k != windowSlot(windows[i-1]) {
			groups++
		}
		if k < slots {
			has[k] = true
		}
	}
	if groups >= slots {
		return 0, false
	}
	if prefer >= 0 && prefer < slots && !has[prefer] {
		return prefer, true
	}
	var empty []int
	for k, ok := range has {
		if !ok {
			empty = append(empty, k)
		}
	}
	return empty[rand.N(len(empty))], true // groups < slots: one is empty
}

// freeSlot returns the index in windows of the oldest window of slot, or
// -1 when the slot has none or another goroutine of this client is taking
// from one of its windows.
func (c *Client) freeSlot(name string, windows []string, slot int) int {
	first := -1
	for i, w := range windows {
		if windowSlot(w) != slot {
			if first >= 0 {
				break
			}
			continue
		}
		if first < 0 {
			first = i
		}
		wn := c.window(name, w)
		if !wn.mu.TryLock() {
			return -1
		}
		wn.mu.Unlock()
	}
	return first
}

// quietSlot returns the index in windows of the oldest window of a slot
// written longest ago (by the zxid of its latest write), among the slots
// with IDs left and not busy with another goroutine of this client. Slots
// written within a few transactions of the quietest count as quiet too,
// and one of those is picked at random: clients that start together on a
// sequence whose slots all went quiet together then spread out instead of
// all picking the same slot. It reads at most quietReads windows, from a
// random slot on; when none could be read it picks a slot at random. The
// reads go out together: one round trip of latency.
func (c *Client) quietSlot(ctx context.Context, name string, windows []string) int {
	from := groupStart(windows, rand.N(len(windows)))
	reads := min(len(windows), quietReads)
	mzxids := make([]int64, reads) // 0: used up, busy or unread
	var wg sync.WaitGroup
	s := c.zk.Session()
	for i := range reads {
		w := windows[(from+i)%len(windows)]
		wn := c.window(name, w)
		if !wn.mu.TryLock() {
			continue
		}
		wn.mu.Unlock()
		wg.Go(func() {
			data, stat, err := s.Get(ctx, c.Path(name)+"/"+w)
			c.stats.requests.Add(1)
			if err != nil {
				return
			}
			if st, err := state.ParseState(name+"/"+w, data); err == nil && st.Fresh() > 0 {
				mzxids[i] = stat.Mzxid
			}
		})
	}
	wg.Wait()
	type slotWrite struct {
		first  int   // index in windows of the slot's oldest window
		latest int64 // zxid of the slot's latest write
	}
	var slots []slotWrite
	quietest := int64(math.MaxInt64)
	for i := 0; i < reads; {
		sw := slotWrite{first: (from + i) % len(windows)}
		for slot := windowSlot(windows[sw.first]); i < reads && windowSlot(windows[(from+i)%len(windows)]) == slot; i++ {
			sw.latest = max(sw.latest, mzxids[i])
		}
		if sw.latest > 0 {
			slots = append(slots, sw)
			quietest = min(quietest, sw.latest)
		}
	}
	var quiet []int
	for _, sw := range slots {
		if sw.latest-quietest <= int64(2*reads) {
			quiet = append(quiet, sw.first)
		}
	}
	if len(quiet) > 0 {
		return quiet[rand.N(len(quiet))]
	}
	return from
}

// nextGroup returns the index of the oldest window of the slot after the
// slot of windows[k], wrapping around.
func nextGroup(windows []string, k int) int {
	slot := windowSlot(windows[k])
	for i := 1; i < len(windows); i++ {
		if j := (k + i) % len(windows); windowSlot(windows[j]) != slot {
			return groupStart(windows, j)
		}
	}
	return k
}

// quietReads bounds the windows quietSlot reads: with many slots, a sample
// of them finds a quiet one as well.
const quietReads = 32

// groupStart returns the index of the oldest window of the slot of
// windows[k] (a slot's windows are adjacent, oldest first).
func groupStart(windows []string, k int) int {
	for k > 0 && windowSlot(windows[k-1]) == windowSlot(windows[k]) {
		k--
	}
	return k
}
