package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// Result is what applying a Cmd did; the proposer gets it back.
type Result struct {
	// Order is the order after the command (the unchanged order on a
	// rejection or replay; nil when it does not exist).
	Order   *order.Order
	Outcome order.Outcome
	// Replayed is the stored first answer of an Idempotency-Key repeat.
	Replayed *IdemRecord
	// Notification is set when applying a NotifyUpdate: the record as it
	// now stands, without its body (Store.Notification reads it whole).
	Notification *outbox.Notification
	// Pruned is how many notifications or idempotency records a prune
	// removed.
	Pruned int
	// Rewrapped is how many values a VaultRewrap replaced.
	Rewrapped int
	// Merchant is the merchant record a key rotation wrote.
	Merchant *command.Merchant
	// Resealed are the merchant records a VaultRewrap rewrote: a replica
	// replaying the log after the previous vault key was dropped could not
	// open them as first written, and reads them again from these.
	Resealed []*command.Merchant
	// MID is the MID record a registration wrote (or found the same).
	MID *command.MID
	Err error
}

// Batch is one Pebble batch: the effects of one Raft batch, applied by the
// FSM and committed at once. Reads during apply must go through the Batch
// itself (it implements the reader: its own writes, then the store), never
// through b.b, which is a plain, unindexed Pebble batch.
type Batch struct {
	s *Store
	b *pebble.Batch
	// Created lists the notifications this batch put in the outbox, for the
	// dispatcher to pick up after commit.
	Created []*outbox.Notification
	// orders are the orders this batch wrote, for its own later reads and
	// for the cache once committed.
	orders map[string]*order.Order
	// written is every key this batch set (nil value: deleted), so later
	// commands of the same Raft batch read earlier ones' writes. A plain map
	// is much cheaper than an indexed Pebble batch on the hot path.
	written map[string][]byte
	// pendingChanges is what this batch changes in the pending-authorisation
	// set (pending.go), applied to it when the batch commits.
	pendingChanges map[string]pendingChange
	// encBuf is the scratch buffer of binary encodings (orders, tokens,
	// notifications): each is encoded into it, then copied once at its
	// exact size, since b.written keeps the value until the batch ends.
	encBuf []byte
	// timed is what this batch added to the schedules (timed.go).
	timed timedAdds
	// mids are the MIDs this batch registered, for the index once
	// committed (mids.go).
	mids []*command.MID
}

// Get reads through the batch: its own writes, then the store.
func (b *Batch) Get(key []byte) ([]byte, io.Closer, error) {
	if v, ok := b.written[string(key)]; ok {
		if v == nil {
			return nil, nil, pebble.ErrNotFound
		}
		return v, io.NopCloser(nil), nil
	}
	return b.s.db.Get(key)
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch {
	b := &Batch{s: s, b: s.db.NewBatch(), orders: s.fsm.spareOrders, written: s.fsm.spareWritten,
		pendingChanges: s.fsm.sparePending}
	s.fsm.spareOrders, s.fsm.spareWritten, s.fsm.sparePending = nil, nil, nil
	if b.orders == nil {
		b.orders = map[string]*order.Order{}
	}
	if b.written == nil {
		b.written = map[string][]byte{}
	}
	if b.pendingChanges == nil {
		b.pendingChanges = map[string]pendingChange{}
	}
	return b
}

// fsmScratch is what the FSM keeps between its batches. Only the FSM's
// goroutine uses it (batches are applied one at a time), so it has no lock.
//
// recent holds the decoded orders the last two committed batches wrote:
// an acquirer's answer usually commits a batch or two after its order's
// acceptance, and finding the order here saves decoding it from the cache
// on every replica. They are the newest versions: a later write would be
// in a newer batch, which is looked at first. The maps of a batch that
// leaves recent, its write overlay and its changes to the pending set are
// cleared and reused by the next batch instead of growing new ones.
type fsmScratch struct {
	recent       [2]map[string]*order.Order
	spareOrders  map[string]*order.Order
	spareWritten map[string][]byte
	sparePending map[string]pendingChange
}

// committed rotates the batch's maps into recent and the spares.
func (f *fsmScratch) committed(b *Batch) {
	old := f.recent[1]
	f.recent[1], f.recent[0] = f.recent[0], b.orders
	if old != nil {
		clear(old)
		f.spareOrders = old
	}
	clear(b.written)
	f.spareWritten = b.written
	clear(b.pendingChanges)
	f.sparePending = b.pendingChanges
	b.orders, b.written, b.pendingChanges = nil, nil, nil
}

// recentOrder finds key among the orders the last batches wrote.
func (f *fsmScratch) recentOrder(key []byte) *order.Order {
	for _, m := range f.recent {
		if o, ok := m[string(key)]; ok {
			return o
		}
	}
	return nil
}

// forget drops everything kept: the state is being replaced.
func (f *fsmScratch) forget() { *f = fsmScratch{} }

// Commit writes the batch with the Raft index it brings the store to. It
// does not fsync: the Raft log is the durable record, and entries after the
// persisted applied index are re-applied on restart (see DESIGN.md).
//
// About once a second the batch also carries a checkpoint of the
// pending-authorisation set as it stood before the batch (pending.go).
func (b *Batch) Commit(appliedIndex uint64) error {
	var checkpointed func()
	if b.s.pending.checkpointDue() {
		var err error
		if checkpointed, err = b.s.pending.checkpoint(b.b); err != nil {
			return err
		}
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], appliedIndex)
	if err := b.b.Set(keyApplied, v[:], nil); err != nil {
		return err
	}
	if err := b.b.Commit(pebble.NoSync); err != nil {
		return err
	}
	b.s.reportTimed(&b.timed)
	for k := range b.orders {
		b.s.orders.put(k, b.written[k])
		b.s.history.put(k, b.written[k])
	}
	if checkpointed != nil {
		checkpointed()
	}
	b.s.pending.committed(b.pendingChanges, appliedIndex)
	b.s.midsCommitted(b.mids)
	b.s.fsm.committed(b)
	return nil
}

// getOrder reads an order as this batch sees it: its own writes first, then
// the cache, then Pebble (filling the cache: the FSM is the only writer).
// key is the order's (orderKey).
func (b *Batch) getOrder(key []byte) (*order.Order, error) {
	if o, ok := b.orders[string(key)]; ok {
		return o, nil
	}
	if o := b.s.fsm.recentOrder(key); o != nil {
		return o, nil
	}
	if o := b.s.orders.get(key); o != nil {
		return o, nil
	}
	if !b.s.known.Load().mayContain(key) {
		return nil, nil // a new order_id: certain without reading Pebble
	}
	v, err := get(b, key) // a copy, which the cache may keep
	if v == nil || err != nil {
		return nil, err
	}
	o, err := decodeOrderValue(v)
	if err != nil {
		return nil, err
	}
	b.s.orders.put(string(key), v)
	return o, nil
}

// Close releases the batch.
func (b *Batch) Close() { b.b.Close() }

func (b *Batch) putJSON(key []byte, v any) {
	data, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		panic(fmt.Sprintf("persistence: encode %q: %v", key[:2], err))
	}
	b.set(key, data)
}

// set and del panic on failure: a replica that cannot write its state must
// stop rather than diverge silently (business rejections are results, storage
// failures are fatal).
func (b *Batch) set(key, value []byte) {
	b.setAs(string(key), key, value)
}

// setAs is set for a caller that holds the key as a string too (k ==
// string(key)): the batch's overlay takes that copy instead of making one.
func (b *Batch) setAs(k string, key, value []byte) {
	if err := b.b.Set(key, value, nil); err != nil {
		panic(fmt.Sprintf("persistence: set: %v", err))
	}
	if value == nil {
		value = []byte{}
	}
	b.written[k] = value
	b.timed.noteSet(key)
}

func (b *Batch) del(key []byte) {
	if err := b.b.Delete(key, nil); err != nil {
		panic(fmt.Sprintf("persistence: delete: %v", err))
	}
	b.written[string(key)] = nil
}

// Apply applies one command. It is deterministic: the same command on the
// same state gives the same writes and result on every replica.
func (b *Batch) Apply(c *command.Cmd) Result {
	switch {
	case c.Order != nil:
		return b.applyOrder(c.Order)
	case c.Merchant != nil:
		b.putJSON(append([]byte(prefixMerchant), c.Merchant.ID...), c.Merchant)
		return Result{}
	case c.Notify != nil:
		return b.applyNotify(c.Notify)
	case c.Member != nil:
		return b.applyMember(c.Member)
	case c.NotifyPrune != nil:
		return b.applyNotifyPrune(c.NotifyPrune)
	case c.IdemPrune != nil:
		return b.applyIdemPrune(c.IdemPrune)
	case c.MerchantKeys != nil:
		return b.applyMerchantKeys(c.MerchantKeys)
	case c.VaultRewrap != nil:
		return b.applyVaultRewrap(c.VaultRewrap)
	case c.Audit != nil:
		return b.applyAudit(c.Audit)
	case c.ClusterCA != nil:
		return b.applyClusterCA(c.ClusterCA)
	case c.JoinToken != nil:
		return b.applyJoinToken(c.JoinToken)
	case c.RequestHashKey != nil:
		return b.applyRequestHashKey(c.RequestHashKey)
	case c.Operator != nil:
		return b.applyOperator(c.Operator)
	case c.Session != nil:
		return b.applySession(c.Session)
	case c.MID != nil:
		return b.applyMID(c.MID)
	}
	return Result{Err: fmt.Errorf("empty command")}
}

func (b *Batch) applyOrder(cmd *order.Command) Result {
	var rec *IdemRecord // the key's record, if any
	if cmd.IdempotencyKey != "" {
		var err error
		rec, err = getJSON[IdemRecord](b, refKey(prefixIdem, cmd.Merchant, cmd.IdempotencyKey))
		if err != nil {
			panic(fmt.Sprintf("persistence: read idempotency record: %v", err))
		}
		if rec != nil {
			switch order.UseOfKey(rec.CreatedAt, rec.RequestHash, cmd.Time, cmd.RequestHash) {
			case order.KeyRepeat:
				return Result{Replayed: rec}
			case order.KeyConflict:
				return Result{Outcome: order.Outcome{Reject: order.KeyConflictRejection()}}
			}
		}
	}
	key := orderKey(cmd.Merchant, cmd.OrderID) // next's too: an order's key never changes
	cur, err := b.getOrder(key)
	if err != nil {
		panic(fmt.Sprintf("persistence: read order: %v", err))
	}
	if rej := b.walletReplayed(cur, cmd); rej != nil {
		return Result{Outcome: order.Outcome{Reject: rej}}
	}
	next, out := order.Apply(cur, cmd)
	if !out.Changed() {
		if out.Reject != nil && cmd.IdempotencyKey != "" {
			b.putIdempotency(cmd.Merchant, cmd.IdempotencyKey, rec, &IdemRecord{
				RequestHash: cmd.RequestHash, CreatedAt: cmd.Time, Reject: out.Reject,
			})
		}
		return Result{Order: cur, Outcome: out}
	}
	b.putOrder(key, cur, next)
	b.applySideEffects(cmd, next, out)
	if cmd.Kind == order.KindMoveOutcome {
		b.answerMovementKey(cur, next, cmd)
	}
	if cmd.IdempotencyKey != "" {
		b.putIdempotency(cmd.Merchant, cmd.IdempotencyKey, rec, &IdemRecord{
			RequestHash: cmd.RequestHash, CreatedAt: cmd.Time, Status: 200,
			Response: order.NewView(next, order.WithTxn, out.TxnID).Marshal(),
		})
	}
	return Result{Order: next, Outcome: out}
}

// answerMovementKey rewrites the stored answer of the Idempotency-Key a
// settle, void or refund came with when the acquirer's answer to it is
// applied: a repeat of the request then shows its outcome, as the first
// answer did when the acquirer answered within the request.
func (b *Batch) answerMovementKey(cur, next *order.Order, cmd *order.Command) {
	m := cur.Movement(cmd.TxnID)
	if m == nil || m.IdempotencyKey == "" {
		return
	}
	rec, err := getJSON[IdemRecord](b, refKey(prefixIdem, cmd.Merchant, m.IdempotencyKey))
	if err != nil {
		panic(fmt.Sprintf("persistence: read idempotency record: %v", err))
	}
	if rec == nil || rec.Reject != nil || rec.CreatedAt != m.At {
		return // pruned since, or the key now answers another request
	}
	updated := *rec
	updated.Response = order.NewView(next, order.WithTxn, cmd.TxnID).Marshal()
	b.putJSON(refKey(prefixIdem, cmd.Merchant, m.IdempotencyKey), &updated)
}

// putOrder writes the order and keeps its secondary indexes in step: the
// pending-authorisation set (only authorisations due at the acquirer: one
// waiting for the customer's 3-D Secure answer is not resumed; held in
// memory, pending.go), the auto-settle schedule, and the form and 3-D
// Secure indexes (forms.go), and the back office's search indexes
// (search.go). key is the order's (orderKey).
func (b *Batch) putOrder(key []byte, cur, next *order.Order) {
	k := string(key) // one copy for the batch's maps and then the cache's
	b.encBuf = command.AppendOrder(b.encBuf[:0], next)
	b.setAs(k, key, bytes.Clone(b.encBuf))
	b.orders[k] = next
	if cur == nil {
		b.s.known.Load().add(key)
	}
	if due := next.AcquirerDue(); due != cur.AcquirerDue() {
		b.pendingChanges[k] = pendingChange{ref: OrderRef{Merchant: next.Merchant, OrderID: next.ID}, due: due}
	}
	var oldDue int64
	if cur != nil {
		oldDue = cur.AutoSettleAt
	}
	if oldDue != next.AutoSettleAt {
		if oldDue != 0 {
			b.del(timedRefKey(prefixSettle, oldDue, next.Merchant, next.ID))
		}
		if next.AutoSettleAt != 0 {
			b.set(timedRefKey(prefixSettle, next.AutoSettleAt, next.Merchant, next.ID), nil)
		}
	}
	b.putFormIndexes(cur, next)
	b.putSearchIndexes(cur, next)
}

// applySideEffects writes what a change brings beside the order: the sealed
// card of a first payment, the token of an approved one, and the
// notification of a status change (the transactional outbox).
func (b *Batch) applySideEffects(cmd *order.Command, next *order.Order, out order.Outcome) {
	if cmd.Kind == order.KindCreate && len(cmd.Create.SealedCard) > 0 {
		b.set(append([]byte(prefixCard), next.Source.CardID...), cmd.Create.SealedCard)
	}
	b.formSideEffects(cmd, next)
	if cmd.Kind == order.KindCreate && out.Created && cmd.Create.ReplayKey != "" {
		b.set(append([]byte(prefixReplay), cmd.Create.ReplayKey...), refKey("", next.Merchant, next.ID))
	}
	if cmd.Kind == order.KindAuthOutcome && cmd.Outcome.PaymentToken != "" {
		b.encBuf = command.AppendTokenGrant(b.encBuf[:0], &TokenRecord{
			Merchant: next.Merchant, CardID: next.Source.CardID,
			ExpiresAt: cmd.Outcome.TokenExpiresAt, Source: next.Source,
		})
		b.set(append([]byte(prefixToken), cmd.Outcome.PaymentToken...), bytes.Clone(b.encBuf))
	}
	// A 3-D Secure challenge notifies too: it delivers redirect_url
	// (interface 6.1.2) although the status stays processing.
	if (out.StatusChanged || out.RedirectSet || out.MoveAnswered) && next.CallbackURL != "" {
		b.addNotification(next, cmd.Time)
	}
}
