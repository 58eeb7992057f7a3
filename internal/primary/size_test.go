package primary

import (
	"testing"
	"unsafe"
)

// The primary keeps one tracked per sequence: at 100,000 sequences every
// Go size class it grows into costs megabytes.
func TestTrackedStaysSmall(t *testing.T) {
	if got := unsafe.Sizeof(tracked{}); got > 240 {
		t.Fatalf("tracked is %d bytes, more than 240 (the size class it fits now): keep rare fields apart, as storeErrs is", got)
	}
	if got := unsafe.Sizeof(stored{}); got > 24 {
		t.Fatalf("stored is %d bytes, more than 24: a restore reads the configuration from the store", got)
	}
}
