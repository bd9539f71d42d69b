package node

import (
	"context"
	"time"

	"github.com/paygate/gateway/persistence/command"
)

// Expired operator sessions are refused by every node from their expiry
// on (transport/server/sessions.go); the leader also deletes their records
// now and then, so the store does not keep one per sign-in forever.
const (
	sessionPrunePoll  = time.Hour
	sessionPruneBatch = 1000
)

// pruneSessions deletes expired sessions while this node leads.
func (n *Node) pruneSessions(ctx context.Context) {
	tick := time.NewTicker(sessionPrunePoll)
	defer tick.Stop()
	for {
		if _, err := n.pruneSessionsOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			n.logger.Warn("prune expired operator sessions", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pruneSessionsOnce deletes up to sessionPruneBatch sessions expired at
// now, one proposal each (a deletion of an already deleted session is
// nothing), and says how many.
func (n *Node) pruneSessionsOnce(ctx context.Context, now time.Time) (int, error) {
	hashes, err := n.store.ExpiredSessions(now.UnixNano(), sessionPruneBatch)
	if err != nil {
		return 0, err
	}
	for i, h := range hashes {
		if _, err := n.raft.Propose(ctx, &command.Cmd{Session: &command.Session{TokenHash: h, End: true}}); err != nil {
			return i, err
		}
	}
	return len(hashes), nil
}
