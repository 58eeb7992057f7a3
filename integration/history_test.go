package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one range of IDs a worker received: the unit the checker reads.
// A worker that got several ranges in one call records each with the same
// call times.
type Record struct {
	// Seq is the sequence the IDs belong to.
	Seq string `json:"seq"`
	// Start and End bound the range, inclusive.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Worker names the worker that received the range (go-alloc-3,
	// go-take-1, http-seqkeeper2-0, ...).
	Worker string `json:"worker"`
	// Source is where the IDs came from: the worker itself for the Go
	// library (its allocator's buffer dies with it), the replica for HTTP
	// (the replica's allocator buffered them). The checker blames gaps
	// after a crashed source on its buffer.
	Source string `json:"source"`
	// T0 and T1 are when the call started and returned; for an allocator
	// run, the first and the last Next.
	T0 time.Time `json:"t0"`
	T1 time.Time `json:"t1"`
	// Scenario is the fault scenario running when the call returned.
	Scenario string `json:"scenario"`
}

// Len returns the number of IDs in the record.
func (r Record) Len() int64 { return r.End - r.Start + 1 }

// Event is something the suite did or saw that explains the history: a
// fault injected or healed, a worker or replica crashed, a call failed.
type Event struct {
	T        time.Time `json:"t"`
	Scenario string    `json:"scenario"`
	// Kind is "fault", "heal", "crash" (Subject lost its buffered IDs),
	// "error" (a call of worker Subject failed, Detail says how), "race"
	// (worker process Subject reported a data race, Detail is the report)
	// or "note".
	Kind    string `json:"kind"`
	Subject string `json:"subject,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Sample is one poll of every replica's GET /v1/status.
type Sample struct {
	T time.Time `json:"t"`
	// Leaders are the reachable replicas that said they lead.
	Leaders []string `json:"leaders,omitempty"`
	// Reachable counts the replicas that answered.
	Reachable int `json:"reachable"`
	// Stored and Rates are the primary's stored ceiling and consumption
	// rate (IDs/s) per sequence, when a primary answered.
	Stored map[string]int64   `json:"stored,omitempty"`
	Rates  map[string]float64 `json:"rates,omitempty"`
}

// History is the complete, shared record of a chaos run: every range every
// worker received, the events and the primary polls. It is safe for
// concurrent use and keeps everything in memory (ranges, not IDs, so
// millions of IDs cost a few megabytes).
type History struct {
	mu       sync.Mutex
	scenario string
	records  []Record
	events   []Event
	samples  []Sample
	// ceilings holds every stored ceiling the primary reported, per
	// sequence: a gap that ends at one of them is the reserve skipped by
	// a revalidation or a restore.
	ceilings map[string]map[int64]bool
}

// NewHistory returns an empty history in scenario "start".
func NewHistory() *History {
	return &History{scenario: "start", ceilings: make(map[string]map[int64]bool)}
}

// SetScenario tags everything recorded from now on with name.
func (h *History) SetScenario(name string) {
	h.mu.Lock()
	h.scenario = name
	h.mu.Unlock()
}

// Scenario returns the current scenario name.
func (h *History) Scenario() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scenario
}

// Add records ranges received by one call.
func (h *History) Add(seq, worker, source string, t0, t1 time.Time, ranges [][2]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range ranges {
		h.records = append(h.records, Record{
			Seq: seq, Start: r[0], End: r[1], Worker: worker, Source: source,
			T0: t0, T1: t1, Scenario: h.scenario,
		})
	}
}

// Event records an event of the current scenario, now.
func (h *History) Event(kind, subject, detail string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, Event{T: time.Now(), Scenario: h.scenario, Kind: kind, Subject: subject, Detail: detail})
}

// AddSample records a poll of the replicas, and the stored ceilings the
// primary reported in it.
func (h *History) AddSample(s Sample, stored map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, s)
	for seq, c := range stored {
		m := h.ceilings[seq]
		if m == nil {
			m = make(map[int64]bool)
			h.ceilings[seq] = m
		}
		m[c] = true
	}
}

// Snapshot is a consistent copy of a History for the checker.
type Snapshot struct {
	Records  []Record
	Events   []Event
	Samples  []Sample
	Ceilings map[string]map[int64]bool
}

// Snapshot copies the history so far.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{
		Records:  append([]Record(nil), h.records...),
		Events:   append([]Event(nil), h.events...),
		Samples:  append([]Sample(nil), h.samples...),
		Ceilings: make(map[string]map[int64]bool, len(h.ceilings)),
	}
	for seq, m := range h.ceilings {
		c := make(map[int64]bool, len(m))
		for k := range m {
			c[k] = true
		}
		s.Ceilings[seq] = c
	}
	return s
}

// Dump writes the history to dir as JSON lines (records.jsonl,
// events.jsonl, samples.jsonl) and returns the directory. With dir empty
// it uses $SEQKEEPER_CHAOS_DIR, else a new directory under the system's
// temporary directory that outlives the test.
func (h *History) Dump(dir, name string) (string, error) {
	if dir == "" {
		dir = os.Getenv("SEQKEEPER_CHAOS_DIR")
	}
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "seqkeeper-chaos-")
	} else {
		dir = filepath.Join(dir, fmt.Sprintf("%s-%s", cleanName(name), time.Now().Format("20060102-150405")))
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("dump history: %w", err)
	}
	s := h.Snapshot()
	if err := writeJSONLines(filepath.Join(dir, "records.jsonl"), s.Records); err != nil {
		return dir, err
	}
	if err := writeJSONLines(filepath.Join(dir, "events.jsonl"), s.Events); err != nil {
		return dir, err
	}
	return dir, writeJSONLines(filepath.Join(dir, "samples.jsonl"), s.Samples)
}

func writeJSONLines[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dump history: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return fmt.Errorf("dump history to %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("dump history to %s: %w", path, err)
	}
	return f.Close()
}

func cleanName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
