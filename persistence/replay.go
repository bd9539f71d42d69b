package persistence

import (
	"fmt"

	"github.com/paygate/gateway/order"
)

// Wallet replay protection (contract section 9). A wallet token's
// transaction id (wallet.Payment.ReplayKey) is recorded under r/<key> by the
// batch that creates the order paying with it, and a later create with the
// same key is refused: the record is replicated state, so every node, and
// every node after a restart, gives the same answer. Records are never
// deleted: a token is refused anyway once its signing time or message
// expiration has passed, so pruning them is possible later, but they are a
// few dozen bytes per wallet payment.

// WalletReplay returns the order that used a wallet token's replay key
// (wallet.Payment.ReplayKey), or nil when no order has used it.
func (s *Store) WalletReplay(replayKey string) (*OrderRef, error) {
	return walletReplay(s.db, replayKey)
}

func walletReplay(r reader, replayKey string) (*OrderRef, error) {
	v, err := get(r, append([]byte(prefixReplay), replayKey...))
	if err != nil || v == nil {
		return nil, err
	}
	ref := splitRef(v)
	return &ref, nil
}

// walletReplayed refuses a wallet payment whose token an earlier order used
// (contract section 9): replicated state, so every node and every restart
// agrees. The order-exists rule comes first: when the order already exists,
// order.Apply answers (the same request replays, another conflicts), so an
// idempotent repeat of a wallet request still returns its order.
func (b *Batch) walletReplayed(cur *order.Order, cmd *order.Command) *order.Rejection {
	if cur != nil || cmd.Kind != order.KindCreate || cmd.Create == nil || cmd.Create.ReplayKey == "" {
		return nil
	}
	ref, err := walletReplay(b, cmd.Create.ReplayKey)
	if err != nil {
		panic(fmt.Sprintf("persistence: read wallet replay record: %v", err))
	}
	if ref == nil {
		return nil
	}
	return &order.Rejection{Kind: order.RejectReplay, Attribute: "payment_source",
		Message: "payment_source has already been used: the wallet transaction id was seen before"}
}
