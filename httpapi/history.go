package httpapi

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The history ring behind GET /v1/history: one sample every
// HistoryInterval, the last HistorySamples of them (15 minutes), so the
// status console can draw the last minutes without a metrics server. It
// costs a few kilobytes whatever the number of sequences.
const (
	HistoryInterval = 5 * time.Second
	HistorySamples  = 180
	// historyStatusTimeout bounds the status call of one sample.
	historyStatusTimeout = 2 * time.Second
)

// HistoryView is the body of GET /v1/history.
type HistoryView struct {
	// IntervalSeconds is the time between samples.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Samples are the recent samples, oldest first; at most
	// HistorySamples. Empty until the first interval has passed.
	Samples []HistorySample `json:"samples"`
}

// HistorySample is what the replica saw at one moment.
type HistorySample struct {
	At time.Time `json:"at"`
	// IDsPerSecond is the rate at which this replica's API handed out IDs
	// since the previous sample (every sequence together).
	IDsPerSecond float64 `json:"ids_per_second"`
	// Leading: this replica was the primary.
	Leading bool `json:"leading"`
	// MinRunwaySeconds is, on the primary, the shortest runway of any
	// sequence (how long its reserve lasts at its rate, at most a day);
	// null on a standby or without sequences.
	MinRunwaySeconds *float64 `json:"min_runway_seconds"`
	// MinRunwaySequence names the sequence with that runway.
	MinRunwaySequence string `json:"min_runway_sequence,omitempty"`
}

// history is a bounded ring of samples, filled by a goroutine that starts
// with the first request the Server serves (so that Options.Status is
// only ever called once the Server serves, like a handler) and stops in
// Close.
type history struct {
	mu      sync.Mutex
	samples []HistorySample // ring of at most HistorySamples
	next    int             // where the next sample goes once full
	// lastServed and lastAt are the served counter at the last sample.
	lastServed int64
	lastAt     time.Time

	started, stopped bool
	stop, done       chan struct{}
	// running spares requests the lock once sampling has started.
	running atomic.Bool
}

func newHistory() *history {
	return &history{stop: make(chan struct{}), done: make(chan struct{})}
}

// start starts sampling s every HistoryInterval, once, unless closed.
func (h *history) start(s *Server) {
	if h.running.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.stopped {
		return
	}
	h.started = true
	h.running.Store(true)
	h.lastServed, h.lastAt = s.served.Load(), time.Now()
	go h.run(s, HistoryInterval)
}

// run samples every interval until close.
func (h *history) run(s *Server, interval time.Duration) {
	defer close(h.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			s.sampleHistory(now)
		}
	}
}

// close stops sampling and waits for the goroutine to end.
func (h *history) close() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	started := h.started
	close(h.stop)
	h.mu.Unlock()
	if started {
		<-h.done
	}
}

// add records one sample, dropping the oldest when the ring is full.
func (h *history) add(sm HistorySample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) < HistorySamples {
		h.samples = append(h.samples, sm)
		return
	}
	h.samples[h.next] = sm
	h.next = (h.next + 1) % HistorySamples
}

// view returns the samples, oldest first.
func (h *history) view() HistoryView {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HistorySample, 0, len(h.samples))
	out = append(out, h.samples[h.next:]...)
	out = append(out, h.samples[:h.next]...)
	return HistoryView{IntervalSeconds: HistoryInterval.Seconds(), Samples: out}
}

// sampleHistory records the rate since the last sample and, on the
// primary, the shortest runway from the status' reserve.
func (s *Server) sampleHistory(now time.Time) {
	h := s.history
	served := s.served.Load()
	h.mu.Lock()
	dt := now.Sub(h.lastAt).Seconds()
	delta := served - h.lastServed
	h.lastServed, h.lastAt = served, now
	h.mu.Unlock()
	sm := HistorySample{At: now.UTC()}
	if dt > 0 {
		sm.IDsPerSecond = math.Round(float64(delta)/dt*100) / 100
	}
	if s.status != nil {
		ctx, cancel := context.WithTimeout(context.Background(), historyStatusTimeout)
		st := s.status(ctx, StatusQuery{Sequences: SequencesNone})
		cancel()
		sm.Leading = st.Leading
		if reserve := st.Reserve; reserve != nil && reserve.Leading {
			sm.MinRunwaySeconds, sm.MinRunwaySequence = reserve.Summary.MinRunwaySeconds, reserve.Summary.MinRunwaySequence
		}
	}
	h.add(sm)
}

func (s *Server) handleHistory(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.history.view())
}
