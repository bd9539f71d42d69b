package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence/command"
)

// Membership: raft's configuration decides who votes; the member records in
// the store (command.Member) add each node's HTTP address. The leader
// changes both, configuration first, so a record never names a node raft
// does not know for long: a failed record write is repaired by the joiner's
// retry, and a leader always rewrites its own record (RecordSelf).

// ErrInvalidMember is a join or remove request that names no node.
var ErrInvalidMember = errors.New("cluster: node_id, raft_addr and http_addr are required")

// ErrUnknownMember is a remove of a node that is not a member.
var ErrUnknownMember = errors.New("cluster: no such member")

// ErrLastVoter is a remove of the only voter: raft refuses it, and the
// cluster would have no one left to decide anything.
var ErrLastVoter = errors.New("cluster: the only voter cannot be removed")

// membershipTimeout bounds one configuration change.
const membershipTimeout = 10 * time.Second

// Join adds (or re-addresses) a voter and records it. It must run on the
// leader; the HTTP layer forwards it there. It is idempotent: a node that
// retries its join, or rejoins after a restart, changes nothing.
func (n *Node) Join(ctx context.Context, m command.Member) error {
	if m.NodeID == "" || m.RaftAddr == "" || m.HTTPAddr == "" {
		return ErrInvalidMember
	}
	cf := n.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return leaderErr(err)
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		switch {
		case s.ID == raft.ServerID(m.NodeID):
			present = s.Address == raft.ServerAddress(m.RaftAddr) && s.Suffrage == raft.Voter
		case s.Address == raft.ServerAddress(m.RaftAddr):
			// Another id on the same address: a node rebuilt under a new id.
			if err := n.Raft.RemoveServer(s.ID, 0, membershipTimeout).Error(); err != nil {
				return leaderErr(err)
			}
			if err := n.record(ctx, command.Member{NodeID: string(s.ID), Removed: true}); err != nil {
				return err
			}
		}
	}
	if !present {
		// AddVoter also updates the address of a known id.
		f := n.Raft.AddVoter(raft.ServerID(m.NodeID), raft.ServerAddress(m.RaftAddr), 0, membershipTimeout)
		if err := f.Error(); err != nil {
			return leaderErr(err)
		}
		n.cfg.Logger.Info("member added", "node_id", m.NodeID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr)
	}
	return n.record(ctx, m)
}

// Remove takes a node out of the configuration and deletes its record. The
// leader may remove itself: it deletes its record first (it cannot write
// once it has left) and then steps down.
func (n *Node) Remove(ctx context.Context, id string) error {
	if id == "" {
		return ErrInvalidMember
	}
	cf := n.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return leaderErr(err)
	}
	known, otherVoters := false, 0
	for _, s := range cf.Configuration().Servers {
		known = known || s.ID == raft.ServerID(id)
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(id) {
			otherVoters++
		}
	}
	if known && otherVoters == 0 {
		return ErrLastVoter
	}
	rec, err := n.FSM.store.Member(id)
	if err != nil {
		return err
	}
	if !known && rec == nil {
		return ErrUnknownMember
	}
	del := command.Member{NodeID: id, Removed: true}
	self := id == n.cfg.NodeID
	if self && rec != nil {
		if err := n.record(ctx, del); err != nil {
			return err
		}
	}
	if known {
		if err := n.Raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout).Error(); err != nil {
			if self && rec != nil {
				// Still a member: put its record back, or followers could
				// not route to it (best effort; a new term rewrites it).
				if rerr := n.record(ctx, *rec); rerr != nil {
					n.cfg.Logger.Warn("restore member record after a failed remove", "node_id", id, "error", rerr)
				}
			}
			return leaderErr(err)
		}
		n.cfg.Logger.Info("member removed", "node_id", id)
	}
	if !self && rec != nil {
		return n.record(ctx, del)
	}
	return nil
}

// TransferLeadership hands leadership to the voter id (any voter when id is
// empty) and returns once it has taken over: operators drain a node before
// maintenance this way, and tests pick the leader.
func (n *Node) TransferLeadership(id string) error {
	if id == "" {
		return transferErr(n.Raft.LeadershipTransfer().Error())
	}
	if id == n.cfg.NodeID {
		if n.Raft.State() == raft.Leader {
			return nil
		}
		return fmt.Errorf("%w: not the leader", ErrNoLeader)
	}
	cf := n.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return leaderErr(err)
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(id) && s.Suffrage == raft.Voter {
			return transferErr(n.Raft.LeadershipTransferToServer(s.ID, s.Address).Error())
		}
	}
	return ErrUnknownMember
}

// ErrNoOtherVoter is a leadership transfer with no other voter to take it.
var ErrNoOtherVoter = errors.New("cluster: no other voter to hand leadership to")

// ErrTransferFailed is a leadership transfer that did not happen in time:
// the target did not catch up or win its election (raft's reason follows).
// Leadership stays where it was.
var ErrTransferFailed = errors.New("cluster: leadership did not move")

// transferErr names raft's leadership transfer errors, which are plain
// strings, so the operator learns why rather than "internal error".
func transferErr(err error) error {
	if err == nil {
		return nil
	}
	if err := leaderErr(err); errors.Is(err, ErrNoLeader) {
		return err
	}
	if err.Error() == "cannot find peer" {
		return ErrNoOtherVoter
	}
	return fmt.Errorf("%w: %v", ErrTransferFailed, err)
}

// HandOver gives leadership to another voter before this node stops, as
// etcd does: followers then forward to a live leader at once, instead of to
// a stopped one until an election timeout passes (seconds of 503 6.02 on
// every node). It first waits for what this leader has appended to be
// applied (a barrier), so the requests in flight get their answers as
// leader; proposals in the short transfer itself are refused (503 6.02),
// and one appended just before the step-down ends with an unknown outcome,
// as at any change of leader. It does nothing (false) on a follower or a
// sole voter, and gives up when ctx ends; raft bounds each step by an
// election timeout.
func (n *Node) HandOver(ctx context.Context) (bool, error) {
	if n.Raft.State() != raft.Leader {
		return false, nil
	}
	cf := n.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return false, err
	}
	others := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.NodeID) {
			others++
		}
	}
	if others == 0 {
		return false, nil
	}
	election := n.Raft.ReloadableConfig().ElectionTimeout
	done := make(chan error, 1)
	go func() {
		if err := n.Raft.Barrier(election).Error(); err != nil {
			done <- err
			return
		}
		done <- n.Raft.LeadershipTransfer().Error()
	}()
	select {
	case err := <-done:
		return err == nil, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// record writes a member record unless the store already holds it.
func (n *Node) record(ctx context.Context, m command.Member) error {
	cur, err := n.FSM.store.Member(m.NodeID)
	if err != nil {
		return err
	}
	if (m.Removed && cur == nil) || (!m.Removed && cur != nil && *cur == m) {
		return nil
	}
	res, err := n.Propose(ctx, &command.Cmd{Member: &m})
	if err != nil {
		return err
	}
	return res.Err
}

// RecordSelf writes this node's member record if it is missing or stale.
// The leader calls it at the start of its term: the bootstrap node records
// itself this way, and so does a node whose addresses changed.
func (n *Node) RecordSelf(ctx context.Context) error {
	return n.record(ctx, n.SelfMember())
}

// SelfMember is this node's member record as it should be.
func (n *Node) SelfMember() command.Member {
	return command.Member{NodeID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr}
}

// InConfiguration reports whether this node is in its latest known raft
// configuration (false after it was removed, or before it joined).
func (n *Node) InConfiguration() bool {
	cf := n.Raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			return true
		}
	}
	return false
}

// HadState reports whether the data dir held raft state at start (a
// restart) rather than being new.
func (n *Node) HadState() bool { return n.hadState }

// StoredMember returns a member record from the local store, or nil.
func (n *Node) StoredMember(id string) (*command.Member, error) {
	return n.FSM.store.Member(id)
}

// Route says where a request should be served.
type Route struct {
	// Self: this node leads and serves the request.
	Self bool
	// LeaderID and LeaderRaft name the leader to forward to (over its
	// cluster port); LeaderRaft is empty when there is no leader.
	LeaderID   string
	LeaderRaft string
	// LeaderHTTP is the leader's recorded HTTP address, for display
	// (empty when its record is unknown here).
	LeaderHTTP string
}

// Route finds the leader from raft, and its HTTP address from the member
// records.
func (n *Node) Route() Route {
	addr, id := n.Raft.LeaderWithID()
	if id == "" {
		return Route{}
	}
	if string(id) == n.cfg.NodeID {
		if n.Raft.State() == raft.Leader {
			return Route{Self: true, LeaderID: string(id), LeaderRaft: string(addr), LeaderHTTP: n.cfg.HTTPAddr}
		}
		return Route{}
	}
	r := Route{LeaderID: string(id), LeaderRaft: string(addr)}
	if m, err := n.FSM.store.Member(string(id)); err == nil && m != nil {
		r.LeaderHTTP = m.HTTPAddr
	}
	return r
}

// MemberInfo is a member as the cluster status shows it: raft's
// configuration joined with the member records.
type MemberInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// InRaft is false for a record raft's configuration does not hold
	// (a join or remove half done); Recorded is false for the reverse.
	InRaft   bool `json:"in_raft"`
	Recorded bool `json:"recorded"`
}

// Members lists the members as this node knows them, by id.
func (n *Node) Members() ([]MemberInfo, error) {
	cf := n.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	recs, err := n.FSM.store.Members()
	if err != nil {
		return nil, err
	}
	_, leader := n.Raft.LeaderWithID()
	byID := map[string]*MemberInfo{}
	for _, s := range cf.Configuration().Servers {
		byID[string(s.ID)] = &MemberInfo{ID: string(s.ID), RaftAddr: string(s.Address),
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader, InRaft: true}
	}
	for _, r := range recs {
		mi := byID[r.NodeID]
		if mi == nil {
			mi = &MemberInfo{ID: r.NodeID, RaftAddr: r.RaftAddr}
			byID[r.NodeID] = mi
		}
		mi.HTTPAddr, mi.Recorded = r.HTTPAddr, true
	}
	out := make([]MemberInfo, 0, len(byID))
	for _, mi := range byID {
		out = append(out, *mi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SelfStatus is one node's own view of raft, for the cluster status.
// Status is the answer of GET /admin/v1/cluster: the members as the
// answering node knows them, each with its own report when it answered.
// The server renders it; gatewayctl and the tests decode it.
type Status struct {
	// NodeID is the node that answered; LeaderID the leader it knows.
	NodeID   string         `json:"node_id"`
	LeaderID string         `json:"leader_id"`
	Term     uint64         `json:"term"`
	Members  []MemberStatus `json:"members"`
}

// MemberStatus is one member: its configuration and, when it answered,
// its own raft view.
type MemberStatus struct {
	MemberInfo
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Self is the member's own report (nil when unreachable).
	Self *SelfStatus `json:"self,omitempty"`
}

type SelfStatus struct {
	NodeID            string `json:"node_id"`
	RaftAddr          string `json:"raft_addr"`
	HTTPAddr          string `json:"http_addr"`
	State             string `json:"state"`
	Term              uint64 `json:"term"`
	LeaderID          string `json:"leader_id"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`   // last entry whose effects are in the store
	FirstLogIndex     uint64 `json:"first_log_index"` // entries before it were compacted into a snapshot
	LastLogIndex      uint64 `json:"last_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	LastContact       string `json:"last_contact,omitempty"`
	Restores          uint64 `json:"snapshot_restores"`
	// Digest is the state digest at DigestIndex (only when asked for).
	Digest      string `json:"digest,omitempty"`
	DigestIndex uint64 `json:"digest_index,omitempty"`
}

// Leading reports whether the node was the leader when it answered.
func (s SelfStatus) Leading() bool { return s.State == raft.Leader.String() }

// Self reports this node's raft state; withDigest adds the state digest.
func (n *Node) Self(withDigest bool) (SelfStatus, error) {
	_, leader := n.Raft.LeaderWithID()
	st := n.Raft.Stats()
	s := SelfStatus{
		NodeID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr,
		State: n.Raft.State().String(), Term: n.Raft.CurrentTerm(), LeaderID: string(leader),
		CommitIndex: n.Raft.CommitIndex(), AppliedIndex: n.FSM.AppliedIndex(), LastLogIndex: n.Raft.LastIndex(),
		LastContact: st["last_contact"], Restores: n.FSM.Restores(),
	}
	s.LastSnapshotIndex, _ = strconv.ParseUint(st["last_snapshot_index"], 10, 64)
	s.FirstLogIndex, _ = n.wal.FirstIndex()
	if withDigest {
		d, idx, err := n.FSM.store.Digest()
		if err != nil {
			return s, fmt.Errorf("digest: %w", err)
		}
		s.Digest, s.DigestIndex = d, idx
	}
	return s, nil
}

// UnspecifiedHost reports whether host:port listens on every interface
// rather than naming an address: no member can be reached at it.
func UnspecifiedHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
