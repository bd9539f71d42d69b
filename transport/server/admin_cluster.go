package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/internal/netaddr"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
)

// Cluster admin API (contract section 1):
//
//	GET  /admin/v1/cluster          members, leader, term; each member's raft indexes (asked of the member itself)
//	GET  /admin/v1/cluster/self     this node's own raft view (?digest=1 adds the state digest)
//	POST /admin/v1/cluster/join-token {"ttl_seconds"}: a join token for new nodes (peer.go)
//	POST /admin/v1/cluster/join     {"node_id","raft_addr","http_addr"}: add a voter (runs on the leader)
//	POST /admin/v1/cluster/remove   {"node_id"}: remove a member (runs on the leader)
//	POST /admin/v1/cluster/transfer-leadership {"node_id"}: hand leadership to that voter (any, when empty)
//
// GETs answer from the node asked; POSTs are forwarded to the leader like
// every admin write. Members ask each other over the cluster port
// (peer.go), never over this API.

// peerStatusTimeout bounds asking one member for its status.
const peerStatusTimeout = time.Second

// memberFieldMax bounds node ids and addresses, in bytes.
const memberFieldMax = 255

func (s *Server) clusterAdminRoutes() map[string]AdminHandler {
	return map[string]AdminHandler{
		"cluster":                     s.clusterStatus,
		"cluster/self":                s.clusterSelf,
		"cluster/join":                s.clusterJoin,
		"cluster/remove":              s.clusterRemove,
		"cluster/transfer-leadership": s.clusterTransfer,
		"cluster/join-token":          s.clusterJoinToken, // peer.go
		"reconcile":                   s.serveReconcile,   // admin_reconcile.go
	}
}

func (s *Server) clusterStatus(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET for the cluster status"))
		return
	}
	out, err := s.clusterView(string(ctx.QueryArgs().Peek("digest")) == "1")
	if err != nil {
		writeError(ctx, s.errorFor("cluster status", err))
		return
	}
	writeJSON(ctx, 200, out)
}

// clusterView is the cluster as this node sees it, each member's raft
// indexes asked of the member itself (the admin API and the dashboard).
func (s *Server) clusterView(digest bool) (cluster.Status, error) {
	c := s.cfg.Cluster
	members, err := c.Members()
	if err != nil {
		return cluster.Status{}, err
	}
	self := c.SelfMember()
	out := cluster.Status{NodeID: self.NodeID, LeaderID: c.Route().LeaderID, Term: c.Term(),
		Members: make([]cluster.MemberStatus, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		out.Members[i].MemberInfo = m
		ms := &out.Members[i]
		if m.ID == self.NodeID {
			st, err := c.Self(digest)
			ms.Reachable, ms.Self = err == nil, &st
			if err != nil {
				ms.Error = err.Error()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.peerSelf(m.RaftAddr, digest)
			if err != nil {
				ms.Error = err.Error()
				return
			}
			ms.Reachable, ms.Self = true, st
		}()
	}
	wg.Wait()
	return out, nil
}

// peerSelf asks a member for its raft view over the cluster port.
func (s *Server) peerSelf(raftAddr string, digest bool) (*cluster.SelfStatus, error) {
	timeout := peerStatusTimeout
	if digest {
		timeout = 30 * time.Second
	}
	return s.peers.Self(raftAddr, digest, timeout)
}

func (s *Server) clusterSelf(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET for the node status"))
		return
	}
	st, err := s.cfg.Cluster.Self(string(ctx.QueryArgs().Peek("digest")) == "1")
	if err != nil {
		writeError(ctx, s.errorFor("cluster self", err))
		return
	}
	writeJSON(ctx, 200, st)
}

type joinRequest struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

func (s *Server) clusterJoin(ctx *fasthttp.RequestCtx) {
	if req, ok := readJoin(ctx); ok {
		s.joinMember(ctx, req)
	}
}

// readJoin reads a join's POST body; on false it has answered the error.
func readJoin(ctx *fasthttp.RequestCtx) (joinRequest, bool) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to join"))
		return joinRequest{}, false
	}
	req, verr := parseJoin(ctx.PostBody())
	if verr != nil {
		writeError(ctx, verr)
		return req, false
	}
	return req, true
}

// parseJoin decodes and checks a join's body.
func parseJoin(body []byte) (joinRequest, *apierr.Error) {
	var req joinRequest
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
		return req, apierr.New(apierr.BadBody, "body", "body must be a JSON object with node_id, raft_addr and http_addr")
	}
	var verr *apierr.Error
	check := func(attr, v string, addr bool) {
		msg := ""
		switch {
		case v == "":
			msg = attr + " is required"
		case len(v) > memberFieldMax:
			msg = attr + " should be at most 255 characters"
		case addr:
			if _, _, err := net.SplitHostPort(v); err != nil {
				msg = attr + " should be host:port"
			}
		}
		if msg != "" {
			if verr == nil {
				verr = &apierr.Error{Code: apierr.Invalid}
			}
			verr.Add(attr, msg)
		}
	}
	check("node_id", req.NodeID, false)
	check("raft_addr", req.RaftAddr, true)
	check("http_addr", req.HTTPAddr, true)
	return req, verr
}

// joinMember adds a voter (on the leader: the caller forwarded it here).
func (s *Server) joinMember(ctx *fasthttp.RequestCtx, req joinRequest) {
	if p := s.cfg.PKI; p != nil && !p.Secure() && !netaddr.Loopback(req.RaftAddr) {
		writeError(ctx, apierr.New(apierr.Invalid, "raft_addr", "this cluster's links run without TLS (--insecure-cluster-links), which is for loopback addresses only: raft_addr "+req.RaftAddr+" is not one"))
		return
	}
	// A voter that cannot be reached counts against the quorum from the
	// moment it is added: a mistyped address would stop a single node at
	// once. The joining node's cluster port listens before it asks.
	if err := probeRaft(req.RaftAddr); err != nil {
		writeError(ctx, apierr.New(apierr.Invalid, "raft_addr", "raft_addr does not answer ("+err.Error()+"): start the node before it joins"))
		return
	}
	if e := s.joinConflict(req); e != nil {
		writeError(ctx, e)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	err := s.cfg.Cluster.Join(cctx, command.Member{NodeID: req.NodeID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr})
	s.membershipAnswer(ctx, "cluster join", err)
}

// joinConflict refuses a join that would take a live member's place. A
// join re-addresses a known node_id, and removes another member on the
// same raft_addr (a node rebuilt under a new id): right when that member is
// gone, and a cluster without a leader, or without a quorum, when it is
// not. So the node at http_addr must say it is node_id at raft_addr (a
// mistyped address names another node), a node_id in use must belong to a
// member that no longer answers (a second node started with the same
// --node-id, node1 by default, would take the first one's place), and the
// member a join would remove must leave a quorum that answers.
func (s *Server) joinConflict(req joinRequest) *apierr.Error {
	st, err := s.peerSelf(req.RaftAddr, false)
	if err != nil {
		return apierr.New(apierr.Invalid, "raft_addr", "raft_addr does not answer as a member of this cluster ("+err.Error()+"): start the node, with a certificate of this cluster, before it joins")
	}
	if st.NodeID != req.NodeID || !sameAddr(st.HTTPAddr, req.HTTPAddr) {
		return apierr.New(apierr.IllegalStatus, "node_id", fmt.Sprintf(
			"the node at raft_addr %s is %s with http_addr %s, not %s with http_addr %s", req.RaftAddr, st.NodeID, st.HTTPAddr, req.NodeID, req.HTTPAddr))
	}
	if st.State == "Shutdown" {
		// Removed, it stopped its raft (the process still serves): added
		// back, it would be a voter that never votes.
		return apierr.New(apierr.IllegalStatus, "node_id", "the node at http_addr has left the cluster and stopped taking part: restart it with an empty data dir and --join")
	}
	selfMember := s.cfg.Cluster.SelfMember()
	if cluster.UnspecifiedHost(selfMember.HTTPAddr) {
		return apierr.New(apierr.IllegalStatus, "http_addr", "this node advertises "+selfMember.HTTPAddr+
			", which names no address the others can forward to: restart it with --advertise-http-addr host:port first")
	}
	members, err := s.cfg.Cluster.Members()
	if err != nil {
		return nil // the join itself will say what is wrong
	}
	self := selfMember.NodeID
	for _, m := range members {
		switch {
		case m.ID == req.NodeID && !sameAddr(m.RaftAddr, req.RaftAddr) && (m.ID == self || probeRaft(m.RaftAddr) == nil):
			return apierr.New(apierr.IllegalStatus, "node_id", fmt.Sprintf(
				"node_id %s is a member at raft_addr %s, which answers: start the new node with its own --node-id (node1 is the default), or stop the old one and then join", m.ID, m.RaftAddr))
		case m.ID != req.NodeID && sameAddr(m.RaftAddr, req.RaftAddr) && m.InRaft:
			if m.ID == self {
				return apierr.New(apierr.IllegalStatus, "raft_addr", "raft_addr "+m.RaftAddr+" is the leader's")
			}
			if e := s.quorumAfterRemove(m.ID); e != nil {
				return e
			}
		}
	}
	return nil
}

// sameAddr reports whether two host:port addresses name the same place:
// raft records the first node's address as its transport resolved it
// (localhost:7001 becomes 127.0.0.1:7001), while the node itself, and an
// operator, may spell it as typed.
func sameAddr(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	ipsA, ipsB := hostIPs(ha), hostIPs(hb)
	for _, x := range ipsA {
		for _, y := range ipsB {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}

// hostIPs is host's address, or the addresses its name resolves to (none
// when it does not resolve).
func hostIPs(host string) []net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	ips, _ := net.LookupIP(host)
	return ips
}

// probeRaftTimeout bounds the check that a raft address answers.
const probeRaftTimeout = 2 * time.Second

// probeRaft checks that something accepts connections on a raft address.
func probeRaft(addr string) error {
	c, err := net.DialTimeout("tcp", addr, probeRaftTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// quorumAfterRemove refuses a remove after which the voters that answer
// would be fewer than the new configuration's quorum: with one of three
// down, removing a healthy one stops the cluster until the other returns.
func (s *Server) quorumAfterRemove(id string) *apierr.Error {
	members, err := s.cfg.Cluster.Members()
	if err != nil {
		return nil // the remove itself will say what is wrong
	}
	voters, answering, self := 0, 0, s.cfg.Cluster.SelfMember().NodeID
	for _, m := range members {
		if !m.InRaft || !m.Voter || m.ID == id {
			continue
		}
		voters++
		if m.ID == self || probeRaft(m.RaftAddr) == nil {
			answering++
		}
	}
	if voters > 0 && answering < voters/2+1 {
		return apierr.New(apierr.IllegalStatus, "node_id", fmt.Sprintf(
			"removing %s would leave %d voters of which %d answer, fewer than the %d a quorum needs: bring the others back first",
			id, voters, answering, voters/2+1))
	}
	return nil
}

type removeRequest struct {
	NodeID string `json:"node_id"`
}

func (s *Server) clusterRemove(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to remove a member"))
		return
	}
	var req removeRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "body must be a JSON object with node_id"))
		return
	}
	if req.NodeID == "" {
		writeError(ctx, apierr.New(apierr.Invalid, "node_id", "node_id is required"))
		return
	}
	if e := s.quorumAfterRemove(req.NodeID); e != nil {
		writeError(ctx, e)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	s.membershipAnswer(ctx, "cluster remove", s.cfg.Cluster.Remove(cctx, req.NodeID))
}

func (s *Server) clusterTransfer(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to transfer leadership"))
		return
	}
	var req removeRequest
	if body := ctx.PostBody(); len(body) > 0 {
		if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
			writeError(ctx, apierr.New(apierr.BadBody, "body", "body must be a JSON object with node_id"))
			return
		}
	}
	s.membershipAnswer(ctx, "cluster transfer", s.cfg.Cluster.TransferLeadership(req.NodeID))
}

// membershipAnswer renders a join or remove result: the members after it.
func (s *Server) membershipAnswer(ctx *fasthttp.RequestCtx, op string, err error) {
	switch {
	case errors.Is(err, cluster.ErrInvalidMember):
		writeError(ctx, apierr.New(apierr.Invalid, "node_id", err.Error()))
		return
	case errors.Is(err, cluster.ErrUnknownMember):
		writeError(ctx, apierr.New(apierr.NotFound, "node_id", "no member with that node_id"))
		return
	case errors.Is(err, cluster.ErrLastVoter):
		writeError(ctx, apierr.New(apierr.IllegalStatus, "node_id", "the only voter cannot be removed"))
		return
	case errors.Is(err, cluster.ErrNoOtherVoter):
		writeError(ctx, apierr.New(apierr.IllegalStatus, "node_id", "there is no other voter to hand leadership to"))
		return
	case errors.Is(err, cluster.ErrTransferFailed):
		e := apierr.New(apierr.Unavailable, "node_id", err.Error()+"; leadership stays where it was: check that the target is up and caught up, then retry")
		writeError(ctx, e)
		return
	case err != nil:
		writeError(ctx, s.errorFor(op, err))
		return
	}
	members, err := s.cfg.Cluster.Members()
	if err != nil {
		writeError(ctx, s.errorFor(op, err))
		return
	}
	writeJSON(ctx, 200, map[string]any{"status": "ok", "members": members})
}
