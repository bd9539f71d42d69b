// Package heapstats reads the Go heap's statistics after a full
// collection, for tests that check what a structure keeps alive (bytes or
// objects) rather than what it allocated on the way.
package heapstats

import "runtime"

// AfterGC runs a collection and returns the memory statistics after it.
func AfterGC() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
