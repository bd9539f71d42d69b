package persistence

import (
	"errors"
	"fmt"
)

// MerchantKeys replaces one of a merchant's key pairs (contract section
// 14). The leader makes the new pair and decides the end of the overlap
// from its own clock; both travel in the command, so every replica writes
// the same record at the same index and no replica reads a clock.
type MerchantKeys struct {
	MerchantID string `json:"id"`
	// Pair is "api" or "webhook".
	Pair string `json:"pair"`
	// Replaces is the pair's public key the rotation was made against: if
	// another rotation of the pair committed first, this one is refused
	// (ErrRotationConflict) rather than silently dropping that one's keys.
	Replaces     string `json:"replaces"`
	PublicKey    string `json:"pk"`
	SecretSealed []byte `json:"sk_sealed"`
	// PreviousUntil (api only; Unix ns) is when the replaced API pair stops
	// signing requests: the rotation's log time plus the overlap.
	PreviousUntil int64 `json:"prev_until,omitempty"`
}

// Errors of a key rotation, the same on every replica.
var (
	ErrUnknownMerchant  = errors.New("no such merchant")
	ErrRotationConflict = errors.New("another rotation of this key pair committed first")
)

// Merchant reads one merchant record (nil when none).
func (s *Store) Merchant(id string) (*Merchant, error) {
	return getJSON[Merchant](s.db, append([]byte(prefixMerchant), id...))
}

func (b *Batch) applyMerchantKeys(c *MerchantKeys) Result {
	key := append([]byte(prefixMerchant), c.MerchantID...)
	m, err := getJSON[Merchant](b, key)
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
