package host

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/paygate/gateway/internal/heapstats"
)

// windowRecord is an approved authorisation, or a declined one, of rrn.
func windowRecord(kind, rrn string, approved bool) *Record {
	r := &Record{Time: 1, Date: "2026-11-28", Kind: kind, MTI: "0100", MID: "MID000000000001", RRN: rrn,
		STAN: rrn[len(rrn)-6:], Sent: "1128120000", Amount: 1000, Currency: "978", Response: "05"}
	if approved {
		r.Response, r.AuthCode, r.ARN, r.AVS, r.CVV = "00", "A1B2C3", "74000000000000000000001", "Y", "M"
	}
	return r
}

func putRecord(w *window, r *Record) { w.put(r.repeatKey(), r) }

// The window against a model of what it must hold: the first decision of
// each of the last max distinct keys, later decisions of a held key
// replacing its record in place. Random puts over a key space a few times
// the window, with records of every size class (long ones kept in
// window.long), then every key of the space looked up.
//
// Run twice: with the window's seeded hash, and with one that gives every
// key the same hash, so that all but one key at a time go through
// slotIndex.spill.
func TestWindowHoldsTheLastMaxKeys(t *testing.T) {
	withBothHashes(t, 50, testWindowHoldsTheLastMaxKeys)
}

// withBothHashes runs test on a window of max slots with its seeded hash,
// then on one whose indexes give every key the same hash.
func withBothHashes(t *testing.T, max int, test func(*testing.T, *window)) {
	for _, collide := range []bool{false, true} {
		t.Run(fmt.Sprintf("collide=%v", collide), func(t *testing.T) {
			w := newWindow(max)
			if collide {
				same := func(string) uint64 { return 7 }
				w.byKey.hash, w.byOrig.hash = same, same
			}
			test(t, w)
		})
	}
}

func testWindowHoldsTheLastMaxKeys(t *testing.T, w *window) {
	max := w.max
	rng := rand.New(rand.NewPCG(36, 1))
	var fifo []string // the model: distinct keys, oldest first
	model := map[string]Record{}
	keys := map[string]bool{}
	for i := range 5000 {
		r := windowRecord([]string{KindAuth, KindSale, KindRefund, KindCapture, KindReversal}[rng.IntN(5)],
			fmt.Sprintf("%012d", rng.IntN(4*max)), rng.IntN(2) == 0)
		r.Time = int64(i)
		switch rng.IntN(10) {
		case 0: // longer than a slot: kept in window.long
			r.AuthCode = strings.Repeat("L", slotRecordBytes)
		case 1: // a key longer than the wire's fields make
			r.MID = strings.Repeat("M", 70)
		}
		k := r.repeatKey()
		keys[k] = true
		if _, held := model[k]; !held {
			fifo = append(fifo, k)
			if len(fifo) > max {
				delete(model, fifo[0])
				fifo = fifo[1:]
			}
		}
		model[k] = *r
		w.put(k, r)
	}
	for k := range keys {
		got, ok := w.get(k)
		want, held := model[k]
		if ok != held {
			t.Fatalf("%q: held %v, want %v", k, ok, held)
		}
		if ok && *got != want {
			t.Fatalf("%q:\n got %+v\nwant %+v", k, *got, want)
		}
	}
	var n int
	w.each(func(*Record) { n++ })
	if n != max || w.byKey.size() != max {
		t.Fatalf("%d records, %d keys indexed; want %d", n, w.byKey.size(), max)
	}
	if got := len(w.long); got > max {
		t.Fatalf("%d long records kept for %d slots", got, max)
	}
}

// An original's state follows it while the window holds it: captures add
// up, a reversal marks it, a held one (advising) is let go. Once its slot
// goes to another record, the old reference changes nothing, and the
// original can be found neither by its key nor by (MID, STAN, field 7).
// With the seeded hash and with one hash for every key, as above.
func TestWindowOriginalsLeaveWithTheirSlot(t *testing.T) {
	withBothHashes(t, 2, testWindowOriginalsLeaveWithTheirSlot)
}

func testWindowOriginalsLeaveWithTheirSlot(t *testing.T, w *window) {
	auth := windowRecord(KindAuth, "000000000001", true)
	putRecord(w, auth)
	putRecord(w, windowRecord(KindAuth, "000000000002", false))
	if _, ok := w.originalByKey(key(KindAuth, auth.MID, "000000000002", "", "")); ok {
		t.Fatal("a declined authorisation is an original")
	}
	k := key(KindAuth, auth.MID, auth.RRN, "", "")
	o, ok := w.originalByMessage(auth.MID, auth.STAN, auth.Sent)
	if byKey, _ := w.originalByKey(k); !ok || byKey != o {
		t.Fatalf("original by message %v %v, by key %v", o, ok, byKey)
	}
	w.setAdvising(o, true)
	w.captured(o, 300)
	w.captured(o, 200)
	w.reversed(o)
	got, _ := w.original(o)
	want := original{key: k, kind: KindAuth, amount: 1000, captured: 500, reversed: true}
	if got != want || !w.advising(o) {
		t.Fatalf("original %+v (advising %v), want %+v advising", got, w.advising(o), want)
	}
	w.setAdvising(o, false)
	if w.advising(o) {
		t.Fatal("still advising once let go")
	}

	// Two more keys: the first two slots go to them, the original's first.
	next := windowRecord(KindSale, "000000000003", true)
	putRecord(w, next)
	putRecord(w, windowRecord(KindAuth, "000000000004", true))
	if _, ok := w.original(o); ok {
		t.Fatal("the dropped original is still there")
	}
	if _, ok := w.originalByKey(k); ok {
		t.Fatal("the dropped original is found by its key")
	}
	if _, ok := w.originalByMessage(auth.MID, auth.STAN, auth.Sent); ok {
		t.Fatal("the dropped original is found by its message")
	}
	reused, _ := w.originalByKey(key(KindSale, next.MID, next.RRN, "", ""))
	if reused.slot != o.slot {
		t.Fatalf("the sale took slot %d, not the original's %d", reused.slot, o.slot)
	}
	w.setAdvising(o, true) // the old reference
	w.captured(o, 1)
	w.reversed(o)
	if got, _ := w.original(reused); w.advising(reused) || got.captured != 0 || got.reversed {
		t.Fatalf("the old reference changed the slot's new original: %+v (advising %v)", got, w.advising(reused))
	}

	// A later decision of a held key replaces its record and starts its
	// original afresh.
	again, _ := w.originalByKey(key(KindSale, next.MID, next.RRN, "", ""))
	w.captured(again, 700)
	putRecord(w, next)
	fresh, _ := w.originalByKey(key(KindSale, next.MID, next.RRN, "", ""))
	if got, _ := w.original(fresh); got.captured != 0 || fresh == again {
		t.Fatalf("after a new decision: %+v (reference %v, was %v)", got, fresh, again)
	}
}

// The point of the window: a full one is a handful of heap objects, not a
// few per message, so a collection has next to nothing of it to mark. The
// map of strings it replaced was ~5 objects a message (~1 million here).
func TestFullWindowIsFewHeapObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a full window")
	}
	objects := func() uint64 { return heapstats.AfterGC().HeapObjects }
	before := objects()
	w := newWindow(repeatWindowMax)
	for i := range repeatWindowMax {
		r := windowRecord(KindAuth, fmt.Sprintf("%012d", i), true)
		if i%2 == 1 { // a reversal, of every field's largest size
			r.Kind, r.MTI, r.Original = KindReversal, "0400", key(KindAuth, r.MID, r.RRN, "", "")
		}
		putRecord(w, r)
	}
	after := objects()
	runtime.KeepAlive(w)
	if grown := int64(after) - int64(before); grown > 10_000 {
		t.Fatalf("a full window (%d messages) is %d heap objects", repeatWindowMax, grown)
	}
	if _, ok := w.get(key(KindAuth, "MID000000000001", fmt.Sprintf("%012d", 0), "", "")); !ok {
		t.Fatal("the first message is not held")
	}
	if len(w.long) != 0 {
		t.Fatalf("%d records did not fit a slot", len(w.long))
	}
}
