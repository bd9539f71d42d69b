package persistence

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// Retention: two kinds of record are useful for a while only, and each is
// about 1 KB, so kept for ever they would grow the store, its snapshots and
// the copies to followers with every request.
//
//   - A notification, once delivered, is kept for the operator's listing
//     and redelivery for --webhook-retention (x/ indexes it by when it
//     finished). A failed one stays until it is redelivered: the contract
//     (section 6) keeps it visible to the admin API.
//   - An idempotency record answers repeats for order.IdempotencyWindow and is
//     dead weight after it (i/ indexes it by when it was written).
//
// The leader lists what has expired from the index and proposes its
// removal (actors.Scheduler), naming each record by its index entry. Each
// replica removes a record only while that entry is still there as it
// applies the command, so a record that changed since the listing (a
// redelivery, a key used again: each moves or drops its entry) stays.
// Records written before an index existed are not in it and are kept.

// applyNotifyPrune deletes each listed notification still finished at the
// listed time, before p.Before: its record, its body and its entry.
func (b *Batch) applyNotifyPrune(p *command.NotifyPrune) Result {
	// A failed notification indexed before failed ones were kept (stores
	// of an earlier version) leaves the index and stays.
	entries := make([]command.NotifyExpiry, 0, len(p.Entries))
	for _, e := range p.Entries {
		n, err := readNotification(b, e.ID)
		if err != nil {
			panic(fmt.Sprintf("persistence: read notification: %v", err))
		}
		if n != nil && n.State == outbox.Failed && n.FinishedAt == e.FinishedAt {
			b.del(timedKey(prefixFinished, e.FinishedAt, []byte(e.ID)))
			continue
		}
		entries = append(entries, e)
	}
	return b.pruneListed(p.Before, len(entries), func(i int) ([]byte, int64) {
		e := entries[i]
		return timedKey(prefixFinished, e.FinishedAt, []byte(e.ID)), e.FinishedAt
	}, func(i int) [][]byte {
		return [][]byte{notifyKey(entries[i].ID), notifyBodyKey(entries[i].ID)}
	})
}

// pruneListed removes n listed records: for each whose index entry (entry
// gives it, with its time) is dated before before and still present, the
// entry and the keys records names.
func (b *Batch) pruneListed(before int64, n int, entry func(i int) ([]byte, int64), records func(i int) [][]byte) Result {
	keys := make([][]byte, n)
	dated := make([]bool, n)
	for i := range n {
		var at int64
		keys[i], at = entry(i)
		dated[i] = at < before
	}
	present := b.present(keys)
	pruned := 0
	for i := range n {
		if !dated[i] || !present[i] {
			continue
		}
		for _, k := range records(i) {
			b.del(k)
		}
		b.del(keys[i])
		pruned++
	}
	return Result{Pruned: pruned}
}

// FinishedNotifications lists up to limit notifications delivered before
// before (and failed ones an earlier version indexed), oldest first: what
// the retention pass prunes next.
func (s *Store) FinishedNotifications(before int64, limit int) ([]command.NotifyExpiry, error) {
	var out []command.NotifyExpiry
	err := s.scanTimed(finishedIndex, before, func(k, _ []byte) bool {
		out = append(out, command.NotifyExpiry{ID: string(k[len(prefixFinished)+8:]), FinishedAt: dueTime(prefixFinished, k)})
		return len(out) < limit
	})
	return out, err
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
func (b *Batch) applyIdemPrune(p *command.IdemPrune) Result {
	return b.pruneListed(p.Before, len(p.Entries), func(i int) ([]byte, int64) {
		e := p.Entries[i]
		return timedKey(prefixIdemAge, e.CreatedAt, refKey("", e.Merchant, e.Key)), e.CreatedAt
	}, func(i int) [][]byte {
		return [][]byte{refKey(prefixIdem, p.Entries[i].Merchant, p.Entries[i].Key)}
	})
}

// ExpiredIdempotency lists up to limit idempotency records written before
// before, oldest first.
func (s *Store) ExpiredIdempotency(before int64, limit int) ([]command.IdemExpiry, error) {
	var out []command.IdemExpiry
	err := s.scanTimed(idemAgeIndex, before, func(k, _ []byte) bool {
		r := splitRef(k[len(prefixIdemAge)+8:])
		if !utf8.ValidString(r.OrderID) {
			// A prune is a JSON command, which cannot carry it: such a key
			// (the API has refused them since) stays, and the rest go.
			return true
		}
		out = append(out, command.IdemExpiry{Merchant: r.Merchant, Key: r.OrderID, CreatedAt: dueTime(prefixIdemAge, k)})
		return len(out) < limit
	})
	return out, err
}

// present reports which of keys exist as of this point of the batch: in
// the committed store unless the batch itself has written them since.
//
// A prune's keys are index entries listed in order, most of them in a few
// adjacent blocks, so one iterator walks them: a point lookup each would
// find its block again every time, and under sustained writes Pebble's
// block cache has no room to keep it (its capacity goes to the memtables'
// reservations), so every lookup read the block from the file (~16 µs
// against ~1 µs; BenchmarkPruneNotifications).
func (b *Batch) present(keys [][]byte) []bool {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out
	}
	order := make([]int, len(keys)) // keys' indexes in key order
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return bytes.Compare(keys[x], keys[y]) })
	lo, hi := keys[order[0]], keys[order[len(order)-1]]
	it, err := b.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(bytes.Clone(hi), 0)})
	if err != nil {
		panic(fmt.Sprintf("persistence: iterate %q: %v", lo[:2], err))
	}
	next := 0 // the first key of order not yet looked for
	for valid := it.First(); valid && next < len(order); {
		switch c := bytes.Compare(it.Key(), keys[order[next]]); {
		case c < 0: // a key not listed
			valid = it.Next()
		case c > 0: // a listed key that is not there
			next++
		default:
			out[order[next]] = true
			next++
			valid = it.Next()
		}
	}
	if err := it.Close(); err != nil {
		panic(fmt.Sprintf("persistence: iterate %q: %v", lo[:2], err))
	}
	for i, k := range keys {
		if v, ok := b.written[string(k)]; ok {
			out[i] = v != nil
		}
	}
	return out
}
