package persistence

import (
	"math"
	"sync"
)

// queueFloor keeps scans of the webhook queue (prefixDue) off the
// tombstones of delivered notifications. Each delivery deletes its queue
// key, and until compactions drop them a scan from the start of the prefix
// steps over every one: under thousands of deliveries a second that was
// ~10 ms of CPU per scan (BenchmarkDueNotifications), once a second. The
// queue is ordered by due time and the oldest queued notification moves
// forward as they are delivered, so a scan starts at the floor instead:
// the due time of the first queued key the last scan found.
//
// The invariant is that every queued key whose commit has been reported
// (lowered, called by the FSM after each commit) is due at or after floor.
// A scan raises floor to the first key it found, unless the FSM queued an
// earlier one while the scan ran (a snapshot taken before that commit
// cannot have seen it). A key committed but not yet reported can be missed
// by one scan, never lost: the report follows at once and lowers floor, and
// the dispatcher scans again.
type queueFloor struct {
	mu    sync.Mutex
	floor int64 // 0 at open and after a restore: the whole queue
	scans map[*queueScan]struct{}
}

// queueScan is one scan in progress: the earliest due time the FSM queued
// since it began (math.MaxInt64: none).
type queueScan struct{ lowest int64 }

// begin registers a scan and returns the due time to start it at.
func (q *queueFloor) begin() (int64, *queueScan) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sc := &queueScan{lowest: math.MaxInt64}
	if q.scans == nil {
		q.scans = map[*queueScan]struct{}{}
	}
	q.scans[sc] = struct{}{}
	return q.floor, sc
}

// end closes a scan that found its first queued key due at first (or none
// before first: pass the scan's upper bound), raising the floor to it.
// Pass ok=false when the scan failed, to leave the floor as it was.
func (q *queueFloor) end(sc *queueScan, first int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.scans, sc)
	if ok {
		q.floor = max(q.floor, min(first, sc.lowest))
	}
}

// lowered reports a committed queue key due at due.
func (q *queueFloor) lowered(due int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.floor = min(q.floor, due)
	for sc := range q.scans {
		sc.lowest = min(sc.lowest, due)
	}
}

// current is the floor for a read that does not raise it.
func (q *queueFloor) current() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.floor
}
