package persistence

import (
	"fmt"

	"github.com/paygate/gateway/persistence/command"
)

// The cluster links' secrets (cluster/pki, docs/security.md), replicated so
// that any member can check a join token and, after a failover, issue node
// certificates:
//
//	y/ca         → ClusterCA JSON: the CA certificate and its key sealed by the vault
//	y/t/<id>     → JoinToken JSON: a join token's id, the SHA-256 of its secret, its expiry
//
// The token secret itself is never stored, and the CA key only sealed.
const (
	keyClusterCA    = "y/ca"
	prefixJoinToken = "y/t/"
)

// applyClusterCA records the CA the first time; a later one is refused, the
// same way on every replica, so a second leader cannot replace the CA every
// certificate chains to.
func (b *Batch) applyClusterCA(ca *command.ClusterCA) Result {
	cur, err := getJSON[command.ClusterCA](b, []byte(keyClusterCA))
	if err != nil {
		panic(fmt.Sprintf("persistence: read cluster CA: %v", err))
	}
	if cur != nil {
		if cur.CertPEM == ca.CertPEM {
			return Result{}
		}
		return Result{Err: fmt.Errorf("the cluster already has another CA")}
	}
	b.putJSON([]byte(keyClusterCA), ca)
	return Result{}
}

// applyJoinToken records a token. Expired ones are kept (a few hundred
// bytes each, one per token an operator made) and refused by their expiry:
// pruning them here would read the store past this Raft batch, which is
// not cut the same way on every replica.
func (b *Batch) applyJoinToken(t *command.JoinToken) Result {
	if t.ID == "" || t.SecretHash == "" {
		return Result{Err: fmt.Errorf("join token without id or secret hash")}
	}
	b.putJSON([]byte(prefixJoinToken+t.ID), t)
	return Result{}
}

// ClusterCA returns the replicated CA, or nil before the first leader
// recorded it (or when the operator's PKI keeps the CA key away).
func (s *Store) ClusterCA() (*command.ClusterCA, error) {
	return getJSON[command.ClusterCA](s.db, []byte(keyClusterCA))
}

// JoinToken returns a join token's record, or nil.
func (s *Store) JoinToken(id string) (*command.JoinToken, error) {
	return getJSON[command.JoinToken](s.db, []byte(prefixJoinToken+id))
}
