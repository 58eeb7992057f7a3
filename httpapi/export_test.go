package httpapi

import "time"

// WriteIDs is writeIDs, for TestIDAnswerIsJSON.
var WriteIDs = writeIDs

// SampleHistory takes one history sample at now, as the sampler does every
// HistoryInterval.
func SampleHistory(s *Server, now time.Time) { s.sampleHistory(now) }
