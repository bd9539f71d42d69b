//go:build !linux

package persistence

import "errors"

// mapRing is Linux only (history_mem_linux.go); elsewhere the ring's
// chunks are Go heap slices, allocated as it first fills.
func mapRing(uint64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapRing([]byte) error { return nil }
