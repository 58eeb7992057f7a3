package httpapi

import "time"

// SampleHistory takes one history sample at now, as the sampler does every
// HistoryInterval.
func SampleHistory(s *Server, now time.Time) { s.sampleHistory(now) }
