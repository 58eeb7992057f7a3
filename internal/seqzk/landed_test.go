package seqzk

import (
	"testing"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// A widen keeps the held marker, so after a lost reply only the state
// ZooKeeper holds tells whether it landed, not the marker.
func TestAWidenWhoseReplyWasLostIsNotTakenForLanded(t *testing.T) {
	held := state.State{Name: "w", Start: 1, Next: 5, Ceiling: 100, End: 1000, ZKEpoch: 1, Marker: "h-00000000000000aa", PushFloor: 1}
	h := Holding{Name: "w", Exists: true, State: held}
	wide, changed := Widened(held, Widening{End: 5000, Windows: 4})
	if !changed {
		t.Fatal("not widened")
	}
	if landed(h, h, Change{State: &wide, Keep: true}) {
		t.Errorf("a widen to end %d that did not land reads as landed on a state with end %d", wide.End, h.State.End)
	}
}

// A delete whose reply was lost landed if the deletion record was written
// since it was decided, at its ceiling or above, even when a worker has
// registered the name again since (that registration is not to die too);
// it did not land while the record is the one it read.
func TestADeleteWhoseReplyWasLostLandedOnlyIfItsRecordWasWritten(t *testing.T) {
	live := state.State{Name: "d", Start: 1, Next: 5, Ceiling: 100, End: 1000, ZKEpoch: 1, Marker: "h-00000000000000aa", PushFloor: 1}
	from := Holding{Name: "d", Exists: true, State: live, Czxid: 10, Deletion: Deletion{Exists: true, Ceiling: 50, Mzxid: 8}}
	die := Change{Dead: 100}
	if landed(from, from, die) {
		t.Error("the holding it was decided from reads as its death")
	}
	gone := Holding{Name: "d", Deletion: Deletion{Exists: true, Ceiling: 100, Mzxid: 20}}
	if !landed(from, gone, die) {
		t.Error("the znode gone and the record written at its ceiling: not landed")
	}
	reborn := gone
	reborn.Exists, reborn.Czxid, reborn.State = true, 21, state.State{Name: "d", Start: 1, End: 1000, Registered: true}
	if !landed(from, reborn, die) {
		t.Error("landed, then registered again: taken for not landed (the retry would delete the new registration)")
	}
	older := gone
	older.Deletion.Ceiling = 99
	if landed(from, older, die) {
		t.Error("a record below the death's ceiling reads as its death")
	}
}

// A name born again after its whole space went out holds its floor above
// next (PushFloor); widening its space moves next up to that floor, never
// below it: the IDs between belong to earlier incarnations.
func TestAWidenOfANameBornPastItsEndStartsAtItsFloor(t *testing.T) {
	born := state.State{Name: "b", Start: 1, Next: 21, Ceiling: 20, End: 20, ZKEpoch: 1, Marker: "h-00000000000000aa", PushFloor: 24}
	if err := born.Validate(); err != nil {
		t.Fatal(err)
	}
	wide, changed := Widened(born, Widening{End: 100})
	if err := wide.Validate(); !changed || err != nil || wide.Next != 24 || wide.PushFloor != 24 {
		t.Fatalf("widened to %+v (changed %v, %v); want next and push floor 24", wide, changed, err)
	}
}
