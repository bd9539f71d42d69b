//go:build linux

package persistence

import "syscall"

// mapRing reserves a shard's ring outside the Go heap: anonymous memory
// that the kernel backs page by page as the ring first fills, so a small
// store takes little of it, and asks for huge pages (a lookup is a random
// read in hundreds of MiB: fewer TLB misses). Outside the heap, the ring
// neither raises the collector's goal (which grows with the live heap: a
// 600 MB ring had the heap cycle through a GB of fresh pages between
// collections, ~24 page faults a search) nor counts against the memory
// limit, as Pebble keeps its block cache outside it.
func mapRing(size uint64) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice only: refused where huge pages are off
	return b, nil
}

// unmapRing returns a ring of mapRing to the kernel.
func unmapRing(b []byte) error { return syscall.Munmap(b) }
