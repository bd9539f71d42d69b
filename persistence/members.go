package persistence

import (
	"fmt"

	"github.com/paygate/gateway/persistence/command"
)

// prefixMember holds the cluster's member records: n/<node_id> → Member JSON.
// Raft's own configuration knows ids and Raft addresses; the records add what
// raft does not carry (the HTTP address a follower forwards requests to) and
// are replicated like every other state, so every node knows every member.
const prefixMember = "n/"

func memberKey(id string) []byte { return append([]byte(prefixMember), id...) }

// applyMember records or deletes a member. An empty id is a rejection that
// comes out the same on every replica.
func (b *Batch) applyMember(m *command.Member) Result {
	if m.NodeID == "" {
		return Result{Err: fmt.Errorf("member record without node_id")}
	}
	if m.Removed {
		b.del(memberKey(m.NodeID))
		return Result{}
	}
	b.putJSON(memberKey(m.NodeID), m)
	return Result{}
}

// Member returns a member's record, or nil.
func (s *Store) Member(id string) (*command.Member, error) {
	return getJSON[command.Member](s.db, memberKey(id))
}

// Members lists every member record, by node id.
func (s *Store) Members() ([]command.Member, error) {
	return scanJSON[command.Member](s, prefixMember)
}
