package primary

// HoldLandings makes every flight of raises wait, once its raises are in
// ZooKeeper and before the loop takes them in, until release is closed.
// Call it before Run.
func (p *Primary) HoldLandings(release <-chan struct{}) { p.landGate = release }

// ReserveOf returns the reserve the primary keeps for name now: its
// low-water mark, below which it raises the ceiling to twice that above
// next. 0 for a name it does not follow.
func (p *Primary) ReserveOf(name string) int64 {
	p.view.Lock()
	defer p.view.Unlock()
	t := p.seqs[name]
	if t == nil {
		return 0
	}
	return p.reserve(t)
}
