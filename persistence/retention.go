package persistence

import "fmt"

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
// removal (actors.Scheduler); each replica checks every listed record
// again as it applies the command, so a record that changed since the
// listing (a redelivery, a key used again) stays. Records written before
// an index existed are not in it and are kept.

// NotifyPrune removes finished notifications past their retention.
type NotifyPrune struct {
	// Before is the retention cut: notifications finished before it go.
	Before int64    `json:"before"`
	IDs    []string `json:"ids"`
}

// applyNotifyPrune deletes each listed notification that is still finished
// before p.Before: its record, its body and its retention entry.
func (b *Batch) applyNotifyPrune(p *NotifyPrune) Result {
	pruned := 0
	for _, id := range p.IDs {
		n, err := readNotification(b, id)
		if err != nil {
			panic(fmt.Sprintf("persistence: read notification: %v", err))
		}
		if n == nil || n.State == NotifyPending || n.FinishedAt == 0 || n.FinishedAt >= p.Before {
			continue
		}
		b.del(notifyKey(id))
		b.del(notifyBodyKey(id))
		b.del(timedKey(prefixFinished, n.FinishedAt, []byte(id)))
		pruned++
	}
	return Result{Pruned: pruned}
}

// FinishedNotifications lists up to limit notifications delivered or failed
// before before, oldest first: what the retention pass prunes next.
func (s *Store) FinishedNotifications(before int64, limit int) ([]string, error) {
	var ids []string
	err := s.scanTimed(finishedIndex, before, func(k []byte) bool {
		ids = append(ids, string(k[len(prefixFinished)+8:]))
		return len(ids) < limit
	})
	return ids, err
}

// IdemRef names an idempotency record: a merchant's key.
type IdemRef struct {
	Merchant string `json:"m"`
	Key      string `json:"k"`
}

// IdemPrune removes idempotency records written before Before. The leader
// sets Before a margin earlier than its clock's IdempotencyWindow ago, so
// that no leader, whatever its clock, can still replay a removed record.
type IdemPrune struct {
	Before int64     `json:"before"`
	Keys   []IdemRef `json:"keys"`
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

// applyIdemPrune deletes each listed idempotency record still written
// before p.Before, with its age entry.
func (b *Batch) applyIdemPrune(p *IdemPrune) Result {
	pruned := 0
	for _, r := range p.Keys {
		key := refKey(prefixIdem, r.Merchant, r.Key)
		rec, err := getJSON[IdemRecord](b, key)
		if err != nil {
			panic(fmt.Sprintf("persistence: read idempotency record: %v", err))
		}
		if rec == nil || rec.CreatedAt >= p.Before {
			continue
		}
		b.del(key)
		b.del(timedKey(prefixIdemAge, rec.CreatedAt, refKey("", r.Merchant, r.Key)))
		pruned++
	}
	return Result{Pruned: pruned}
}

// ExpiredIdempotency lists up to limit idempotency records written before
// before, oldest first.
func (s *Store) ExpiredIdempotency(before int64, limit int) ([]IdemRef, error) {
	var refs []IdemRef
	err := s.scanTimed(idemAgeIndex, before, func(k []byte) bool {
		r := splitRef(k[len(prefixIdemAge)+8:])
		refs = append(refs, IdemRef{Merchant: r.Merchant, Key: r.OrderID})
		return len(refs) < limit
	})
	return refs, err
}
