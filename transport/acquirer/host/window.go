package host

import (
	"encoding/binary"
	"hash/maphash"
)

// window is the repeat index: the first decision of each of the last
// max messages, by key, and the approved authorisations and sales among
// them by (MID, STAN, field 7) with what has been captured of them and
// whether they were reversed. The caller holds Host.mu.
//
// It holds no pointer the garbage collector must follow per message: the
// records sit in fixed-size slots in a few large byte chunks, and the maps
// to slots are keyed by the keys' hashes (slotIndex). A map of strings
// to records held ~1 million pointers at 200,000 messages, and the
// collector marked them in every cycle of the process, a node's included
// when the host runs in it (docs/performance.md, "Order search", ninth
// series).
//
// Slots are taken in order and, once max are taken, reused oldest first:
// the window is the last max distinct keys, as the ledger wrote them.
type window struct {
	max    int
	chunks [][]byte // slotsPerChunk slots each, allocated as the window fills
	used   int      // slots taken so far, at most max
	next   int      // once used == max, the oldest slot: the next one reused

	byKey  slotIndex // key → its slot
	byOrig slotIndex // origKey → the slot of an approved authorisation or sale
	// long holds, by slot, a packed record larger than a slot's room
	// (slotRecordBytes). The wire's fields are of fixed length and no
	// record is near it; the map is there so that a larger one is kept
	// whole all the same.
	long map[uint32]packedRecord
}

// A slot: the packed record's length (2 bytes, longRecord when it is in
// window.long), then an original's state (what was captured, 8 bytes;
// flags, 1 byte; 1 byte unused; a generation, 4 bytes), then the packed
// record.
const (
	slotBytes       = 192
	slotHeader      = 16
	slotRecordBytes = slotBytes - slotHeader
	slotsPerChunk   = 4096 // 768 KiB chunks
	longRecord      = 0xFFFF
)

// A slot's flags.
const (
	flagOriginal = 1 << iota // an approved authorisation or sale, in byOrig
	flagReversed
	flagAdvising // a capture or reversal of it is being decided (Host.decide)
)

// originalRef names an original as decide holds it: the slot and its
// generation, which changes when the slot is given to another record, so
// that letting go of an original the window has dropped changes nothing.
type originalRef struct{ slot, gen uint32 }

// original is an original's state, as a capture or reversal decides by it.
type original struct {
	key      string // the original's repeat key: a capture's Record.Original
	kind     string
	amount   int64
	captured int64
	reversed bool
}

func newWindow(max int) *window {
	w := &window{max: max, long: map[uint32]packedRecord{}}
	w.byKey = newSlotIndex(func(s uint32) string { return w.record(s).repeatKey() })
	w.byOrig = newSlotIndex(func(s uint32) string { return w.record(s).originalKey() })
	return w
}

func (w *window) slot(s uint32) []byte {
	c := w.chunks[s/slotsPerChunk]
	i := s % slotsPerChunk * slotBytes
	return c[i : i+slotBytes : i+slotBytes]
}

// get returns the record remembered under k.
func (w *window) get(k string) (*Record, bool) {
	s, ok := w.byKey.get(k)
	if !ok {
		return nil, false
	}
	return w.record(s), true
}

// record returns slot s's record, in strings of its own: the slot's bytes
// are reused.
func (w *window) record(s uint32) *Record { return w.packed(s).record() }

func (w *window) packed(s uint32) packedRecord {
	b := w.slot(s)
	n := binary.LittleEndian.Uint16(b)
	if n == longRecord {
		return w.long[s]
	}
	return packedRecord(b[slotHeader : slotHeader+int(n)])
}

// put remembers r under k (k is key of r's fields), in k's slot if k is
// already remembered, else in a new slot or the oldest one. An approved
// authorisation or sale becomes an original with nothing captured.
func (w *window) put(k string, r *Record) {
	s, held := w.byKey.get(k)
	if held {
		w.forgetOriginal(s, w.record(s))
	} else {
		s = w.take()
	}
	b := w.slot(s)
	gen := binary.LittleEndian.Uint32(b[12:]) + 1
	clear(b[:slotHeader])
	binary.LittleEndian.PutUint32(b[12:], gen)
	delete(w.long, s)
	if p := pack(r); len(p) <= slotRecordBytes {
		binary.LittleEndian.PutUint16(b, uint16(len(p)))
		copy(b[slotHeader:], p)
	} else {
		binary.LittleEndian.PutUint16(b, longRecord)
		w.long[s] = p
	}
	if !held {
		w.byKey.set(k, s)
	}
	if (r.Kind == KindAuth || r.Kind == KindSale) && r.approved() {
		b[10] = flagOriginal
		w.byOrig.set(r.originalKey(), s)
	}
}

// take returns a slot for a new key: a new one until max are taken, then
// the oldest, whose record the window forgets (put then writes over it).
func (w *window) take() uint32 {
	if w.used < w.max {
		s := uint32(w.used)
		if int(s/slotsPerChunk) == len(w.chunks) {
			w.chunks = append(w.chunks, make([]byte, slotsPerChunk*slotBytes))
		}
		w.used++
		return s
	}
	s := uint32(w.next)
	w.next = (w.next + 1) % w.max
	r := w.record(s)
	w.forgetOriginal(s, r)
	w.byKey.deleteIf(r.repeatKey(), s)
	return s
}

// forgetOriginal drops slot s, which holds r, from byOrig if it is an
// original there.
func (w *window) forgetOriginal(s uint32, r *Record) {
	if w.slot(s)[10]&flagOriginal != 0 {
		w.byOrig.deleteIf(r.originalKey(), s)
	}
}

// originalByKey returns the original remembered under the repeat key k.
func (w *window) originalByKey(k string) (originalRef, bool) {
	s, ok := w.byKey.get(k)
	if !ok || w.slot(s)[10]&flagOriginal == 0 {
		return originalRef{}, false
	}
	return w.ref(s), true
}

// originalByMessage returns the original of (mid, stan, sent): field 90's
// identity of an authorisation or sale.
func (w *window) originalByMessage(mid, stan, sent string) (originalRef, bool) {
	s, ok := w.byOrig.get(origKey(mid, stan, sent))
	if !ok {
		return originalRef{}, false
	}
	return w.ref(s), true
}

func (w *window) ref(s uint32) originalRef {
	return originalRef{slot: s, gen: binary.LittleEndian.Uint32(w.slot(s)[12:])}
}

// original returns o's state; false if the window no longer holds it.
func (w *window) original(o originalRef) (original, bool) {
	b, ok := w.current(o)
	if !ok {
		return original{}, false
	}
	r := w.record(o.slot)
	return original{
		key:      r.repeatKey(),
		kind:     r.Kind,
		amount:   r.Amount,
		captured: int64(binary.LittleEndian.Uint64(b[2:])),
		reversed: b[10]&flagReversed != 0,
	}, true
}

// current returns o's slot if it still holds o.
func (w *window) current(o originalRef) ([]byte, bool) {
	b := w.slot(o.slot)
	return b, binary.LittleEndian.Uint32(b[12:]) == o.gen && b[10]&flagOriginal != 0
}

// advising reports whether a capture or reversal of o is being decided.
func (w *window) advising(o originalRef) bool {
	b, ok := w.current(o)
	return ok && b[10]&flagAdvising != 0
}

// setAdvising marks o as having a capture or reversal decided, or not;
// nothing if the window no longer holds o.
func (w *window) setAdvising(o originalRef, on bool) {
	if b, ok := w.current(o); ok {
		b[10] &^= flagAdvising
		if on {
			b[10] |= flagAdvising
		}
	}
}

// captured adds amount to what was captured of o.
func (w *window) captured(o originalRef, amount int64) {
	if b, ok := w.current(o); ok {
		binary.LittleEndian.PutUint64(b[2:], binary.LittleEndian.Uint64(b[2:])+uint64(amount))
	}
}

// reversed marks o as reversed.
func (w *window) reversed(o originalRef) {
	if b, ok := w.current(o); ok {
		b[10] |= flagReversed
	}
}

// each calls f with every record the window holds.
func (w *window) each(f func(*Record)) {
	for s := range w.used {
		f(w.record(uint32(s)))
	}
}

// slotIndex maps keys to slots by a seeded hash of the key, checked
// against the key of the slot found (keyOf): a map of 8-byte hashes to
// 4-byte slots holds no pointer. A key whose hash another key already
// holds (about one in 10^9 pairs of a full window) goes in spill, by
// itself.
type slotIndex struct {
	hash   func(string) uint64
	keyOf  func(slot uint32) string
	byHash map[uint64]uint32
	spill  map[string]uint32
}

func newSlotIndex(keyOf func(uint32) string) slotIndex {
	seed := maphash.MakeSeed()
	return slotIndex{
		hash:   func(k string) uint64 { return maphash.String(seed, k) },
		keyOf:  keyOf,
		byHash: map[uint64]uint32{},
		spill:  map[string]uint32{},
	}
}

func (x slotIndex) get(k string) (uint32, bool) {
	if s, ok := x.byHash[x.hash(k)]; ok && x.keyOf(s) == k {
		return s, true
	}
	if len(x.spill) == 0 {
		return 0, false
	}
	s, ok := x.spill[k]
	return s, ok
}

// set maps k to slot s, which holds k's record already.
func (x slotIndex) set(k string, s uint32) {
	h := x.hash(k)
	if cur, ok := x.byHash[h]; ok && cur != s && x.keyOf(cur) != k {
		x.spill[k] = s
		return
	}
	x.byHash[h] = s
	delete(x.spill, k)
}

func (x slotIndex) size() int { return len(x.byHash) + len(x.spill) }

// deleteIf deletes k if it maps to slot s (which holds k's record still):
// another slot may have taken k since (an original of the same MID, STAN
// and field 7, say).
func (x slotIndex) deleteIf(k string, s uint32) {
	h := x.hash(k)
	if got, ok := x.byHash[h]; ok && got == s {
		delete(x.byHash, h)
		return
	}
	if got, ok := x.spill[k]; ok && got == s {
		delete(x.spill, k)
	}
}
