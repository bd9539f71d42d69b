package node

import (
	"context"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// The request-hash key keys the hashes the idempotency records keep of
// each request and the hosted-form tokens (transport/server). They are
// compared with a request's hash long after they were stored, so the key
// must not change when the vault key does: it is the cluster's, replicated
// sealed under the vault key (persistence/hashkey.go), re-sealed by a vault
// rotation like any sealed record, never replaced (docs/security.md).
//
// Its value is the key versions before the record used, derived from the
// vault key then in use: a data dir of such a version keeps every stored
// hash and form token valid, and a node that has not yet applied the
// record (a new leader of an upgraded cluster before its first proposal)
// hashes with the same key.

// hashKeyAAD binds the sealed key to its purpose.
var hashKeyAAD = []byte("request-hash-key")

// currentHashKey is the replicated request-hash key when this node's store
// holds it, and the legacy derivation until then.
func (n *Node) currentHashKey() []byte {
	rec, err := n.store.RequestHashKey()
	if err != nil || rec == nil {
		if err != nil {
			n.logger.Error("read the request-hash key", "error", err)
		}
		return n.legacyHashKey
	}
	key, err := n.vault.Open(rec.SealedKey, hashKeyAAD)
	if err != nil {
		// A key this node's vault cannot open (a node given neither the
		// key that sealed it nor its successor) would hash every retry as
		// another request: say so loudly, and keep the derivation.
		n.logger.Error("open the replicated request-hash key: requests retried with an Idempotency-Key may be refused 5.06 until this node has the vault key that sealed it", "error", err)
		return n.legacyHashKey
	}
	return key
}

// replicateHashKey records the request-hash key once (a leader calls it at
// the start of its term, after the barrier: if the store has none, no
// leader recorded one), then makes the server hash with what the store
// holds.
func (n *Node) replicateHashKey(ctx context.Context) {
	rec, err := n.store.RequestHashKey()
	if err != nil {
		n.logger.Error("read the request-hash key", "error", err)
		return
	}
	if rec == nil {
		sealed, err := n.vault.Seal(n.legacyHashKey, hashKeyAAD)
		if err != nil {
			n.logger.Error("seal the request-hash key", "error", err)
			return
		}
		res, err := n.raft.Propose(ctx, &command.Cmd{RequestHashKey: &command.RequestHashKey{SealedKey: sealed}})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			n.logger.Warn("replicate the request-hash key", "error", err)
			return
		}
		n.logger.Info("recorded the request-hash key in the log")
	}
	n.server.SetHashKey(n.currentHashKey())
}

// resealHashKey re-seals the replicated request-hash key when the current
// vault key did not seal it; ok is false when there is nothing to do.
func (n *Node) resealHashKey() (command.RewrapEntry, bool, error) {
	rec, err := n.store.RequestHashKey()
	if err != nil || rec == nil || !n.notCurrent(rec.SealedKey) {
		return command.RewrapEntry{}, false, err
	}
	old, err := persistence.EncodeRequestHashKey(rec)
	if err != nil {
		return command.RewrapEntry{}, false, err
	}
	if rec.SealedKey, err = n.vault.Reseal(rec.SealedKey, hashKeyAAD); err != nil {
		return command.RewrapEntry{}, false, err
	}
	val, err := persistence.EncodeRequestHashKey(rec)
	if err != nil {
		return command.RewrapEntry{}, false, err
	}
	return persistence.NewRewrapEntry(persistence.RequestHashKeyKey(), old, val), true, nil
}
