package persistence

import (
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/persistence/command"
)

// The request-hash key (docs/security.md "The request-hash key"), replicated
// sealed under the vault key so that it outlives a vault key rotation and
// every member, later leader and restored backup hashes with the same key:
//
//	y/rh → RequestHashKey JSON: the key sealed by the vault
const keyRequestHashKey = "y/rh"

// RequestHashKeyKey is the store key of the sealed request-hash key (the
// vault re-wrap rewrites it).
func RequestHashKeyKey() []byte { return []byte(keyRequestHashKey) }

// applyRequestHashKey records the key the first time; a later one changes
// nothing, the same way on every replica (the stored hashes and form
// tokens were made with the first, and a leader reloads what the store
// holds after proposing).
func (b *Batch) applyRequestHashKey(k *command.RequestHashKey) Result {
	if len(k.SealedKey) == 0 {
		return Result{Err: fmt.Errorf("request-hash key without a sealed key")}
	}
	cur, err := getJSON[command.RequestHashKey](b, []byte(keyRequestHashKey))
	if err != nil {
		panic(fmt.Sprintf("persistence: read request-hash key: %v", err))
	}
	if cur == nil {
		b.putJSON([]byte(keyRequestHashKey), k)
	}
	return Result{}
}

// RequestHashKey returns the replicated request-hash key record, or nil
// before a leader recorded it (a data dir of an older version).
func (s *Store) RequestHashKey() (*command.RequestHashKey, error) {
	return getJSON[command.RequestHashKey](s.db, []byte(keyRequestHashKey))
}

// EncodeRequestHashKey is the record as the store holds it.
func EncodeRequestHashKey(k *command.RequestHashKey) ([]byte, error) {
	return json.Marshal(k, json.Deterministic(true))
}
