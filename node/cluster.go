package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"
)

// joinBackoffMax bounds the wait between two join attempts.
const joinBackoffMax = 2 * time.Second

// joinClient talks to the member a node asks to join.
var joinClient = &http.Client{Timeout: 15 * time.Second}

// maintainMembership gets this node's member record right, then returns:
//
//   - a new node started with --join asks that member (any member: a
//     follower forwards to the leader) to add it, retrying until the record
//     has reached its own store, so it is a voter and peers can forward to it;
//   - a restarted member whose record is missing or stale (its addresses
//     changed) asks the leader to update it.
//
// The leader writes its own record itself (leaderWork → RecordSelf), which
// is how the bootstrap node gets one.
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
		case inConf && route.LeaderHTTP != "":
			target = route.LeaderHTTP
		case n.cfg.Join != "" && (fresh || inConf):
			target = n.cfg.Join
		case !inConf && !fresh:
			n.logger.Info("not a member of the cluster (removed?); not rejoining without a new data dir")
			return
		default:
			continue // no leader known yet
		}
		if n.cfg.AdminToken == "" {
			n.logger.Error("cannot ask to join or update the member record without --admin-token")
			return
		}
		err := n.askJoin(target)
		if err != nil && (attempt <= 3 || attempt%20 == 0) {
			n.logger.Warn("join: not added yet; retrying", "target", target, "attempt", attempt, "error", err)
		}
		if err == nil {
			n.logger.Info("join accepted", "target", target, "node_id", self.NodeID)
		}
	}
}

// askJoin sends POST /admin/v1/cluster/join to target (host:port).
func (n *Node) askJoin(target string) error {
	self := n.raft.SelfMember()
	body, err := json.Marshal(map[string]string{"node_id": self.NodeID, "raft_addr": self.RaftAddr, "http_addr": self.HTTPAddr})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+target+"/admin/v1/cluster/join", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+n.cfg.AdminToken)
	resp, err := joinClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}
