package persistence

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/persistence/command"
)

// Vault key rotation (contract section 14): the leader re-seals the card
// blobs (c/) and merchant records (m/) sealed under the previous vault key,
// a bounded batch at a time, and proposes the new values through the log.
// This package stores blobs and knows no key: the caller says which blob
// needs a new seal and makes it.

// SealedCard is a card blob and the merchant whose order holds it (the
// blob is sealed bound to both).
type SealedCard struct {
	Merchant, CardID string
	Blob             []byte
}

// NewRewrapEntry makes the entry replacing old at key by value.
func NewRewrapEntry(key, old, value []byte) command.RewrapEntry {
	sum := sha256.Sum256(old)
	return command.RewrapEntry{Key: key, OldSum: sum[:], Value: value}
}

// CardKey and MerchantKey are the store keys of a card blob and a merchant.
func CardKey(cardID string) []byte { return append([]byte(prefixCard), cardID...) }

// ClusterCAKey is the store key of the replicated cluster CA (its key is
// sealed under the vault key).
func ClusterCAKey() []byte { return []byte(keyClusterCA) }

// MerchantKey is the store key of a merchant record.
func MerchantKey(id string) []byte { return append([]byte(prefixMerchant), id...) }

// EncodeMerchant is a merchant record as the store holds it.
func EncodeMerchant(m *command.Merchant) ([]byte, error) { return json.Marshal(m) }

func (b *Batch) applyVaultRewrap(c *command.VaultRewrap) Result {
	n := 0
	var resealed []*command.Merchant
	for _, e := range c.Entries {
		if !bytes.HasPrefix(e.Key, []byte(prefixCard)) && !bytes.HasPrefix(e.Key, []byte(prefixMerchant)) &&
			string(e.Key) != keyClusterCA && string(e.Key) != keyRequestHashKey {
			continue // only sealed records are rewritten this way
		}
		cur, err := get(b, e.Key)
		if err != nil {
			panic(fmt.Sprintf("persistence: read %q: %v", e.Key, err))
		}
		if sum := sha256.Sum256(cur); cur == nil || !bytes.Equal(sum[:], e.OldSum) {
			continue
		}
		b.set(e.Key, e.Value)
		n++
		if bytes.HasPrefix(e.Key, []byte(prefixMerchant)) {
			var m command.Merchant
			if err := json.Unmarshal(e.Value, &m); err == nil {
				resealed = append(resealed, &m)
			}
		}
	}
	return Result{Rewrapped: n, Resealed: resealed}
}

// CardsToRewrap walks the orders from the key after (nil: the first) and
// returns up to limit distinct cards whose blob needs(blob), with the key to
// resume from (nil once the walk reached the end). A card is sealed bound
// to its merchant, which only its orders name.
func (s *Store) CardsToRewrap(after []byte, limit int, needs func(blob []byte) bool) ([]SealedCard, []byte, error) {
	lo := []byte(prefixOrder)
	if after != nil {
		lo = append(append([]byte(nil), after...), 0)
	}
	var out []SealedCard
	seen := map[string]bool{}
	var next []byte
	var ferr error
	err := s.scan(lo, prefixEnd(prefixOrder), func(k, v []byte) bool {
		o, err := decodeOrderValue(v)
		if err != nil {
			ferr = err
			return false
		}
		if id := o.Source.CardID; id != "" && !seen[id] {
			seen[id] = true
			blob, err := s.Card(id)
			if err != nil {
				ferr = err
				return false
			}
			if blob != nil && needs(blob) {
				out = append(out, SealedCard{Merchant: o.Merchant, CardID: id, Blob: blob})
			}
		}
		if len(out) >= limit {
			next = append([]byte(nil), k...)
			return false
		}
		return true
	})
	if err == nil {
		err = ferr
	}
	return out, next, err
}

// MerchantValues lists every merchant record with its stored bytes.
func (s *Store) MerchantValues() ([]command.Merchant, [][]byte, error) {
	var recs []command.Merchant
	var raws [][]byte
	var derr error
	err := s.scan([]byte(prefixMerchant), prefixEnd(prefixMerchant), func(_, v []byte) bool {
		var m command.Merchant
		if derr = json.Unmarshal(v, &m); derr != nil {
			return false
		}
		recs = append(recs, m)
		raws = append(raws, append([]byte(nil), v...))
		return true
	})
	if err == nil {
		err = derr
	}
	return recs, raws, err
}

// CountSealed counts the sealed values (card blobs, merchants' sealed
// secrets, the cluster CA's key, the request-hash key) for which
// match(blob) holds.
func (s *Store) CountSealed(match func(blob []byte) bool) (int, error) {
	n := 0
	err := s.scan([]byte(prefixCard), prefixEnd(prefixCard), func(_, v []byte) bool {
		if match(v) {
			n++
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	ca, err := s.ClusterCA()
	if err != nil {
		return 0, err
	}
	if ca != nil && len(ca.SealedKey) > 0 && match(ca.SealedKey) {
		n++
	}
	hk, err := s.RequestHashKey()
	if err != nil {
		return 0, err
	}
	if hk != nil && match(hk.SealedKey) {
		n++
	}
	recs, _, err := s.MerchantValues()
	for _, m := range recs {
		for _, b := range [][]byte{m.APISecretSealed, m.WebhookSecretSealed, m.PreviousAPISecretSealed} {
			if len(b) > 0 && match(b) {
				n++
			}
		}
	}
	return n, err
}

// EncodeClusterCA is the cluster CA record as the store holds it.
func EncodeClusterCA(ca *command.ClusterCA) ([]byte, error) { return json.Marshal(ca) }
