package persistence

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
)

// timedIndex names one of the store's indexes keyed by a due time: a
// schedule that the leader scans for what is due (for the retention
// indexes, the time a record's retention counts from).
type timedIndex int

const (
	queueIndex    timedIndex = iota // q/: webhook deliveries (notify.go)
	settleIndex                     // s/: automatic settlements
	expiryIndex                     // e/: form lifetimes and 3-D Secure challenges (forms.go)
	finishedIndex                   // x/: finished notifications, for retention (retention.go)
	idemAgeIndex                    // i/: idempotency records by age, for retention (retention.go)
	timedIndexes
)

var timedPrefixes = [timedIndexes]string{prefixDue, prefixSettle, prefixExpiry, prefixFinished, prefixIdemAge}

// timedFloor keeps scans of a schedule off the tombstones of what it has
// done. Each delivery, settlement or expiry deletes its key, and until
// compactions drop them a scan from the start of the prefix steps over
// every one: under thousands of deliveries a second that was ~10 ms of CPU
// per scan (BenchmarkDueNotifications), once a second. A schedule is
// ordered by due time and its earliest entry moves forward as entries are
// done, so a scan starts at the floor instead: the due time of the first
// entry the last scan found.
//
// The invariant is that every entry whose commit has been reported
// (lowered, called by the FSM after each commit) is due at or after floor.
// A scan raises floor to the first entry it found, unless the FSM added an
// earlier one while the scan ran (a snapshot taken before that commit
// cannot have seen it). An entry committed but not yet reported can be
// missed by one scan, never lost: the report follows at once and lowers
// floor, and the leader scans again at its next poll.
type timedFloor struct {
	mu    sync.Mutex
	floor int64 // 0 at open and after a restore: the whole index
	scans map[*timedScan]struct{}
}

// timedScan is one scan in progress: the earliest due time the FSM added
// since it began (math.MaxInt64: none).
type timedScan struct{ lowest int64 }

// begin registers a scan and returns the due time to start it at.
func (f *timedFloor) begin() (int64, *timedScan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := &timedScan{lowest: math.MaxInt64}
	if f.scans == nil {
		f.scans = map[*timedScan]struct{}{}
	}
	f.scans[sc] = struct{}{}
	return f.floor, sc
}

// end closes a scan that found its first entry due at first (or none
// before first: pass the scan's upper bound), raising the floor to it.
// Pass ok=false when the scan failed, to leave the floor as it was.
func (f *timedFloor) end(sc *timedScan, first int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.scans, sc)
	if ok {
		f.floor = max(f.floor, min(first, sc.lowest))
	}
}

// lowered reports a committed entry due at due.
func (f *timedFloor) lowered(due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.floor = min(f.floor, due)
	for sc := range f.scans {
		sc.lowest = min(sc.lowest, due)
	}
}

// current is the floor, for a scan that does not raise it.
func (f *timedFloor) current() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.floor
}

// timedAdds is the earliest due time a batch added to each schedule,
// reported to the floors once the batch is committed.
type timedAdds struct {
	earliest [timedIndexes]int64
	added    [timedIndexes]bool
}

// noteSet records a key the batch sets if it is a schedule's entry. Batch.set
// calls it for every key, so no writer of a schedule can leave it out.
func (a *timedAdds) noteSet(key []byte) {
	for ix, prefix := range timedPrefixes {
		if len(key) >= len(prefix)+8 && string(key[:len(prefix)]) == prefix {
			due := dueTime(prefix, key)
			if !a.added[ix] || due < a.earliest[ix] {
				a.earliest[ix], a.added[ix] = due, true
			}
			return
		}
	}
}

// reportTimed lowers the floors to what the committed batch added.
func (s *Store) reportTimed(adds *timedAdds) {
	for ix := range timedIndexes {
		if adds.added[ix] {
			s.timed[ix].lowered(adds.earliest[ix])
		}
	}
}

// resetTimed puts every floor back at the start of its schedule: the store
// has been replaced.
func (s *Store) resetTimed() {
	for ix := range timedIndexes {
		s.timed[ix].lowered(0)
	}
}

// scanTimed calls fn with a schedule's keys due before end, and their
// values, in due order, until fn returns false. It starts at the floor and
// raises the floor to the first key it finds.
func (s *Store) scanTimed(ix timedIndex, end int64, fn func(k, v []byte) bool) error {
	return s.scanTimedAfter(ix, nil, end, fn)
}

// ScheduleCursor is a position in a schedule, to list the entries after it
// (nil: from the start).
type ScheduleCursor []byte

// scanTimedAfter is scanTimed from the entry after cursor. A scan that
// starts past the floor cannot raise it: it does not see what is before.
func (s *Store) scanTimedAfter(ix timedIndex, after ScheduleCursor, end int64, fn func(k, v []byte) bool) error {
	f := &s.timed[ix]
	floor, sc := f.begin()
	if floor >= end {
		f.end(sc, 0, false)
		return nil
	}
	prefix := timedPrefixes[ix]
	lower := timedKey(prefix, floor, nil)
	if after != nil {
		if next := append(bytes.Clone(after), 0); bytes.Compare(next, lower) > 0 {
			lower = next
		}
	}
	first := end // the due time of the first key found
	err := s.scan(lower, timedKey(prefix, end, nil), func(k, v []byte) bool {
		first = min(first, dueTime(prefix, k))
		return fn(k, v)
	})
	f.end(sc, first, err == nil && after == nil)
	return err
}

// dueRefs lists up to limit orders in a schedule due at or before now,
// after cursor, and the cursor after them.
func (s *Store) dueRefs(ix timedIndex, now int64, after ScheduleCursor, limit int) ([]OrderRef, ScheduleCursor, error) {
	var out []OrderRef
	var last []byte
	prefix := timedPrefixes[ix]
	err := s.scanTimedAfter(ix, after, now+1, func(k, _ []byte) bool {
		out = append(out, splitRef(k[len(prefix)+8:]))
		last = append(last[:0], k...) // k is the iterator's, valid until it moves
		return len(out) < limit
	})
	if err != nil {
		return nil, nil, err
	}
	if last == nil {
		return out, after, nil
	}
	return out, last, nil
}

// firstTimed is the earliest due time in a schedule, or 0 when it is empty.
func (s *Store) firstTimed(ix timedIndex) (int64, error) {
	var due int64
	err := s.scanTimed(ix, math.MaxInt64, func(k, _ []byte) bool {
		due = dueTime(timedPrefixes[ix], k)
		return false
	})
	return due, err
}

// dueTime is the due time of a schedule's key.
func dueTime(prefix string, k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(prefix):]))
}
