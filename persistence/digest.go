package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Digest hashes the replicated state, read from one consistent view, and
// returns it with the applied index that view reflects. Two replicas at the
// same applied index must have the same digest; the cluster tests and
// `GET /admin/v1/cluster/self?digest=1` compare them. Per-node keys are left
// out: the a/ meta keys (applied index, restore marker, the pending set's
// checkpoint index) and the p/ keys, which each node checkpoints at its own
// times (pending.go); the orders they name are in the digest.
//
// It reads every key: seconds on a large store. It is a check, not a
// request-path operation.
func (s *Store) Digest() (digest string, applied uint64, err error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	if v, err := get(snap, keyApplied); err != nil {
		return "", 0, err
	} else if v != nil {
		applied = binary.BigEndian.Uint64(v)
	}
	it, err := snap.NewIter(nil)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	var lenBuf [binary.MaxVarintLen64]byte
	meta, pending := []byte(prefixMeta), []byte(prefixPending)
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if bytes.HasPrefix(k, meta) || bytes.HasPrefix(k, pending) {
			continue
		}
		h.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		h.Write(k)
		h.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(v)))])
		h.Write(v)
	}
	if err := it.Close(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), applied, nil
}
