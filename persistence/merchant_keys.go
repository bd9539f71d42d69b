package persistence

// Merchant key rotation (contract section 14): command.MerchantKeys applied.

import (
	"errors"
	"fmt"

	"github.com/paygate/gateway/persistence/command"
)

// Errors of a key rotation, the same on every replica.
var (
	ErrUnknownMerchant  = errors.New("no such merchant")
	ErrRotationConflict = errors.New("another rotation of this key pair committed first")
)

// Merchant reads one merchant record (nil when none).
func (s *Store) Merchant(id string) (*command.Merchant, error) {
	return getJSON[command.Merchant](s.db, append([]byte(prefixMerchant), id...))
}

func (b *Batch) applyMerchantKeys(c *command.MerchantKeys) Result {
	key := append([]byte(prefixMerchant), c.MerchantID...)
	m, err := getJSON[command.Merchant](b, key)
	if err != nil {
		panic(fmt.Sprintf("persistence: read merchant %s: %v", c.MerchantID, err))
	}
	if m == nil {
		return Result{Err: ErrUnknownMerchant}
	}
	switch c.Pair {
	case "api":
		if m.APIPublicKey != c.Replaces {
			return Result{Err: ErrRotationConflict}
		}
		m.PreviousAPIPublicKey, m.PreviousAPISecretSealed = m.APIPublicKey, m.APISecretSealed
		m.PreviousAPIUntil = c.PreviousUntil
		m.APIPublicKey, m.APISecretSealed = c.PublicKey, c.SecretSealed
	case "webhook":
		if m.WebhookPublicKey != c.Replaces {
			return Result{Err: ErrRotationConflict}
		}
		m.WebhookPublicKey, m.WebhookSecretSealed = c.PublicKey, c.SecretSealed
	default:
		return Result{Err: fmt.Errorf("unknown key pair %q", c.Pair)}
	}
	b.putJSON(key, m)
	return Result{Merchant: m}
}
