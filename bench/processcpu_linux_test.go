package bench

import (
	"os"
	"syscall"
	"testing"
)

// The page faults come from /proc as well: a first touch of every page of
// a fresh anonymous mapping shows as at least one fault per page.
func TestSampleProcessesCountsPageFaults(t *testing.T) {
	const pages = 1024
	size := pages * os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	// With transparent huge pages one fault could map 512 pages.
	if err := syscall.Madvise(mem, syscall.MADV_NOHUGEPAGE); err != nil {
		t.Fatal(err)
	}
	a := sampleProcesses(nil)[os.Getpid()]
	for i := 0; i < size; i += os.Getpagesize() {
		mem[i] = 1
	}
	b := sampleProcesses(nil)[os.Getpid()]
	if b.faults < a.faults+pages {
		t.Fatalf("touching %d fresh pages counted %d faults", pages, b.faults-a.faults)
	}
}
