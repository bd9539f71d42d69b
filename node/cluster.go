package node

import (
	"time"
)

// joinBackoffMax bounds the wait between two join attempts.
const joinBackoffMax = 2 * time.Second

// maintainMembership gets this node's member record right, then returns:
//
//   - a new node started with --join asks a member (the one --join named,
//     or any: a follower forwards to the leader) to add it, retrying until
//     the record has reached its own store, so it is a voter and peers can
//     forward to it;
//   - a restarted member whose record is missing or stale (its addresses
//     changed) asks the leader to update it.
//
// Both go over the cluster port (the peer service's join), where the
// member's certificate says who asks. The leader writes its own record
// itself (leaderWork → RecordSelf), which is how the bootstrap node gets one.
func (n *Node) maintainMembership() {
	defer n.bg.Done()
	self := n.raft.SelfMember()
	fresh := !n.raft.HadState()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		select {
		case <-n.stopLeader:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, joinBackoffMax)
		if rec, err := n.raft.StoredMember(self.NodeID); err == nil && rec != nil && *rec == self {
			return
		}
		route := n.raft.Route()
		var target string
		switch inConf := n.raft.InConfiguration(); {
		case route.Self:
			continue // leaderWork records this node
		case inConf && route.LeaderRaft != "":
			target = route.LeaderRaft
		case n.cfg.Join != "" && (fresh || inConf):
			if n.joinRaft == "" {
				info, err := getJoinInfo(n.joinInfoURL())
				if err != nil {
					n.logger.Warn("join: asking for the cluster port", "target", n.cfg.Join, "error", err)
					continue
				}
				n.joinRaft = info.RaftAddr
			}
			target = n.joinRaft
		case !inConf && !fresh:
			n.logger.Info("not a member of the cluster (removed?); not rejoining without a new data dir")
			return
		default:
			continue // no leader known yet
		}
		err := n.peers.Join(target, self, 15*time.Second)
		if err != nil && (attempt <= 3 || attempt%20 == 0) {
			n.logger.Warn("join: not added yet; retrying", "target", target, "attempt", attempt, "error", err)
		}
		if err == nil {
			n.logger.Info("join accepted", "target", target, "node_id", self.NodeID)
		}
	}
}

// joinInfoURL is --join's join-info address.
func (n *Node) joinInfoURL() string {
	if n.cfg.JoinHTTPS {
		return "https://" + n.cfg.Join + "/cluster/v1/join-info"
	}
	return "http://" + n.cfg.Join + "/cluster/v1/join-info"
}
