package model

import (
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// TestMain stops every server testenv started when the tests end.
func TestMain(m *testing.M) { testenv.Main(m) }
