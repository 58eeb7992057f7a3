package primary

// HoldLandings makes every flight of raises wait, once its raises are in
// ZooKeeper and before the loop takes them in, until release is closed.
// Call it before Run.
func (p *Primary) HoldLandings(release <-chan struct{}) { p.landGate = release }
