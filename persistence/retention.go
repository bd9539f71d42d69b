package persistence

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Retention: two kinds of record are useful for a while only, and each is
// about 1 KB, so kept for ever they would grow the store, its snapshots and
// the copies to followers with every request.
//
//   - A notification, once delivered or failed, is kept for the operator's
//     listing and redelivery for --webhook-retention (x/ indexes it by when
//     it finished).
//   - An idempotency record answers repeats for IdempotencyWindow and is
//     dead weight after it (i/ indexes it by when it was written).
//
// The leader lists what has expired from the index and proposes its
// removal (actors.Scheduler), naming each record by its index entry. Each
// replica removes a record only while that entry is still there as it
// applies the command, so a record that changed since the listing (a
// redelivery, a key used again: each moves or drops its entry) stays.
// Records written before an index existed are not in it and are kept.

// NotifyPrune removes finished notifications past their retention. Each
// is named by its retention entry: the FSM removes a notification only if
// that entry is still there (a redelivery deletes it, and a second finish
// writes another), which costs a read of the small, time-ordered x/ keys
// instead of each notification's record.
type NotifyPrune struct {
	// Before is the retention cut: notifications finished before it go.
	Before  int64          `json:"before"`
	Entries []NotifyExpiry `json:"entries"`
}

// NotifyExpiry is a finished notification's retention entry.
type NotifyExpiry struct {
	ID         string `json:"i"`
	FinishedAt int64  `json:"t"`
}

// applyNotifyPrune deletes each listed notification still finished at the
// listed time, before p.Before: its record, its body and its entry.
func (b *Batch) applyNotifyPrune(p *NotifyPrune) Result {
	pruned := 0
	for _, e := range p.Entries {
		entry := timedKey(prefixFinished, e.FinishedAt, []byte(e.ID))
		if e.FinishedAt >= p.Before || !has(b, entry) {
			continue
		}
		b.del(notifyKey(e.ID))
		b.del(notifyBodyKey(e.ID))
		b.del(entry)
		pruned++
	}
	return Result{Pruned: pruned}
}

// FinishedNotifications lists up to limit notifications delivered or failed
// before before, oldest first: what the retention pass prunes next.
func (s *Store) FinishedNotifications(before int64, limit int) ([]NotifyExpiry, error) {
	var out []NotifyExpiry
	err := s.scanTimed(finishedIndex, before, func(k []byte) bool {
		out = append(out, NotifyExpiry{ID: string(k[len(prefixFinished)+8:]), FinishedAt: dueTime(prefixFinished, k)})
		return len(out) < limit
	})
	return out, err
}

// IdemPrune removes idempotency records written before Before, each named
// by its age entry as NotifyPrune names notifications. The leader sets
// Before a margin earlier than IdempotencyWindow ago by its clock, so that
// no leader, whatever its clock, can still replay a removed record.
type IdemPrune struct {
	Before  int64        `json:"before"`
	Entries []IdemExpiry `json:"entries"`
}

// IdemExpiry is an idempotency record's age entry: a merchant's key and
// when its record was written.
type IdemExpiry struct {
	Merchant  string `json:"m"`
	Key       string `json:"k"`
	CreatedAt int64  `json:"t"`
}

// putIdempotency writes a key's record and its age entry, replacing the
// entry of the record it had (old: one past its window).
func (b *Batch) putIdempotency(merchant, key string, old, rec *IdemRecord) {
	ref := refKey("", merchant, key)
	if old != nil {
		b.del(timedKey(prefixIdemAge, old.CreatedAt, ref))
	}
	b.putJSON(refKey(prefixIdem, merchant, key), rec)
	b.set(timedKey(prefixIdemAge, rec.CreatedAt, ref), nil)
}

// applyIdemPrune deletes each listed idempotency record still written at
// the listed time, before p.Before, with its age entry.
func (b *Batch) applyIdemPrune(p *IdemPrune) Result {
	pruned := 0
	for _, e := range p.Entries {
		entry := timedKey(prefixIdemAge, e.CreatedAt, refKey("", e.Merchant, e.Key))
		if e.CreatedAt >= p.Before || !has(b, entry) {
			continue
		}
		b.del(refKey(prefixIdem, e.Merchant, e.Key))
		b.del(entry)
		pruned++
	}
	return Result{Pruned: pruned}
}

// ExpiredIdempotency lists up to limit idempotency records written before
// before, oldest first.
func (s *Store) ExpiredIdempotency(before int64, limit int) ([]IdemExpiry, error) {
	var out []IdemExpiry
	err := s.scanTimed(idemAgeIndex, before, func(k []byte) bool {
		r := splitRef(k[len(prefixIdemAge)+8:])
		out = append(out, IdemExpiry{Merchant: r.Merchant, Key: r.OrderID, CreatedAt: dueTime(prefixIdemAge, k)})
		return len(out) < limit
	})
	return out, err
}

// has reports whether key exists (get cannot tell an empty value from
// none). A failed read panics, as in every read of the FSM.
func has(r reader, key []byte) bool {
	_, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		panic(fmt.Sprintf("persistence: read %q: %v", key[:2], err))
	}
	closer.Close()
	return true
}
