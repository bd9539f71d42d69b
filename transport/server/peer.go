package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
)

// The peer service: what members ask each other, on the cluster port
// (cluster/link) under mutual TLS, never on the HTTP listener.
//
//	GET  /peer/v1/self[?digest=1]  this node's raft view (cluster status, a follower's /readyz)
//	POST /peer/v1/join             {"node_id","raft_addr","http_addr"}: add the calling node (runs on the leader)
//	anything else                  a client request a follower forwards to the leader (forward.go)
//
// The caller is a member: the link let only certificates of the cluster CA
// through. A forwarded admin request comes without the operator's bearer
// token (the follower checked it; the token never leaves the node it was
// sent to). A join connection (link.KindJoin) has no client certificate; it
// reaches only serveJoin, which checks a join token.

// ClusterPKI is the node's side of the cluster's certificates (node/).
type ClusterPKI interface {
	// Secure is false under --insecure-cluster-links.
	Secure() bool
	CAFingerprint() string
	CACertPEM() []byte
	// CanIssue reports whether this node holds the CA key (replicated, or
	// its own), so it can issue node certificates.
	CanIssue() bool
	IssueNodeCert(csrPEM []byte, nodeID string, hosts []string) ([]byte, error)
}

// PeerDialer opens a peer connection (link.KindPeer) to a member's cluster
// port.
type PeerDialer func(addr string, timeout time.Duration) (net.Conn, error)

// peerRequestKey marks a request that came over the peer service.
const peerRequestKey = "gateway.peer"

// fromPeer reports whether a request came from another member.
func fromPeer(ctx *fasthttp.RequestCtx) bool { return ctx.UserValue(peerRequestKey) != nil }

// ServePeers serves the peer service on the cluster port's peer
// connections until ln is closed.
func (s *Server) ServePeers(ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler: s.routePeer, Name: "gatewayd-peer",
		MaxRequestBodySize:    bodyBytesHardMax,
		ReadTimeout:           time.Minute,
		WriteTimeout:          time.Minute,
		IdleTimeout:           2 * time.Minute,
		SecureErrorLogMessage: true,
		Logger:                transportLogger{s.cfg.Logger},
	}
	return srv.Serve(ln)
}

func (s *Server) routePeer(ctx *fasthttp.RequestCtx) {
	ctx.SetUserValue(peerRequestKey, true)
	switch string(ctx.Path()) {
	case "/peer/v1/self":
		s.clusterSelf(ctx)
	case "/peer/v1/join":
		s.peerJoin(ctx)
	case "/peer/v1/audit":
		s.peerAudit(ctx) // admin_audit.go
	case "/peer/v1/sign-in":
		s.peerSignIn(ctx) // sessions.go
	case "/peer/v1/sign-out":
		s.peerSignOut(ctx)
	case "/peer/v1/session-touch":
		s.peerSessionTouch(ctx)
	default:
		s.route(ctx) // a forwarded client request
	}
}

// peerJoin adds the member that asks. The first member it reaches checks
// that the node_id is the one its certificate names; a follower then
// forwards it to the leader.
func (s *Server) peerJoin(ctx *fasthttp.RequestCtx) {
	req, ok := readJoin(ctx)
	if !ok {
		return
	}
	if len(ctx.Request.Header.Peek(ForwardedHeader)) == 0 {
		if id := link.PeerNodeID(ctx.Conn()); id != "" && id != req.NodeID {
			writeError(ctx, apierr.New(apierr.IllegalStatus, "node_id", fmt.Sprintf("the certificate of the calling node names %s, not %s", id, req.NodeID)))
			return
		}
	}
	if handled, _ := s.forward(ctx); handled {
		return
	}
	s.joinMember(ctx, req)
}

// ServeJoins serves the join connections of new nodes (link.KindJoin):
// one route, POST /join, which checks a join token and issues a node
// certificate.
func (s *Server) ServeJoins(ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler: s.serveJoin, Name: "gatewayd-join",
		MaxRequestBodySize: 64 << 10,
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       10 * time.Second,
		// One request per connection: a joiner asks once.
		DisableKeepalive:      true,
		SecureErrorLogMessage: true,
		Logger:                transportLogger{s.cfg.Logger},
	}
	return srv.Serve(ln)
}

// CertRequest is a new node's request for its certificate (JoinCert).
type CertRequest struct {
	JoinToken string `json:"join_token"`
	NodeID    string `json:"node_id"`
	RaftAddr  string `json:"raft_addr"`
	HTTPAddr  string `json:"http_addr"`
	CSR       string `json:"csr"`
}

// CertAnswer is the answer: the node certificate and the cluster CA.
type CertAnswer struct {
	NodeCert string `json:"node_cert"`
	CACert   string `json:"ca_cert"`
}

// tokenPropagation bounds how long a member waits for a just-made join
// token to reach its store (it was committed on the leader a moment ago).
const tokenPropagation = 2 * time.Second

func (s *Server) serveJoin(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) != "/join" || !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "a join connection serves POST /join only"))
		return
	}
	var req CertRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "body must be a JSON object with join_token, node_id, raft_addr, http_addr and csr"))
		return
	}
	p := s.cfg.PKI
	if p == nil || !p.Secure() {
		writeError(ctx, apierr.New(apierr.IllegalStatus, "join_token", "this cluster's links are insecure: join with --join alone"))
		return
	}
	if e := s.checkJoinToken(req.JoinToken); e != nil {
		writeError(ctx, e)
		return
	}
	if _, verr := parseJoin(mustJSON(joinRequest{NodeID: req.NodeID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr})); verr != nil {
		writeError(ctx, verr)
		return
	}
	certPEM, err := p.IssueNodeCert([]byte(req.CSR), req.NodeID, pki.HostsOf(req.RaftAddr))
	if err != nil {
		writeError(ctx, apierr.New(apierr.Invalid, "csr", "no certificate issued: "+err.Error()))
		return
	}
	s.cfg.Logger.Info("node certificate issued with a join token", "node_id", req.NodeID, "raft_addr", req.RaftAddr)
	writeJSON(ctx, 200, CertAnswer{NodeCert: string(certPEM), CACert: string(p.CACertPEM())})
}

// errJoinToken is the answer to a token that is not valid: the same for an
// unknown id and a wrong secret, so neither can be probed.
var errJoinToken = apierr.Code{Code: "1.01", HTTP: 401, Reason: "join token not valid"}

// checkJoinToken checks a join token against the replicated records.
func (s *Server) checkJoinToken(raw string) *apierr.Error {
	tok, err := pki.ParseToken(raw)
	if err != nil {
		return apierr.New(errJoinToken, "join_token", err.Error())
	}
	if tok.CAFingerprint != s.cfg.PKI.CAFingerprint() {
		return apierr.New(errJoinToken, "join_token", "the join token was made for another cluster (its CA fingerprint differs)")
	}
	var rec *command.JoinToken
	for deadline := time.Now().Add(tokenPropagation); ; {
		if rec, err = s.cfg.Store.JoinToken(tok.ID); err != nil {
			s.cfg.Logger.Error("read join token", "error", err)
			return apierr.New(apierr.Internal, "server", "internal error")
		}
		if rec != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec == nil || !pki.SecretMatches(tok.Secret, rec.SecretHash) {
		return apierr.New(errJoinToken, "join_token", "the join token is not valid: make a new one with gatewayctl cluster join-token")
	}
	if exp := time.Unix(0, rec.ExpiresAt); !s.cfg.Now().Before(exp) {
		return apierr.New(errJoinToken, "join_token", "the join token expired at "+exp.UTC().Format(time.RFC3339)+": make a new one with gatewayctl cluster join-token")
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// JoinInfo is the answer of GET /cluster/v1/join-info on the HTTP
// listener: where a new node finds the cluster port, and the CA it must
// check against its token's fingerprint. Nothing in it is secret.
type JoinInfo struct {
	RaftAddr string `json:"raft_addr"`
	CACert   string `json:"ca_cert,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

func (s *Server) serveJoinInfo(ctx *fasthttp.RequestCtx) {
	if !allowMethod(ctx, "GET") {
		return
	}
	info := JoinInfo{RaftAddr: s.cfg.Cluster.SelfMember().RaftAddr, Insecure: true}
	if p := s.cfg.PKI; p != nil && p.Secure() {
		info.CACert, info.Insecure = string(p.CACertPEM()), false
	}
	writeJSON(ctx, 200, info)
}

// maxJoinTokenTTL bounds a join token's life.
const maxJoinTokenTTL = 7 * 24 * time.Hour

// clusterJoinToken makes a join token (runs on the leader: an admin write).
func (s *Server) clusterJoinToken(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to make a join token"))
		return
	}
	var req struct {
		TTLSeconds int64 `json:"ttl_seconds"`
	}
	if body := ctx.PostBody(); len(body) > 0 {
		if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
			writeError(ctx, apierr.New(apierr.BadBody, "body", "body must be a JSON object with ttl_seconds"))
			return
		}
	}
	ttl := time.Hour
	if req.TTLSeconds != 0 {
		if req.TTLSeconds < 1 || req.TTLSeconds > int64(maxJoinTokenTTL/time.Second) {
			writeError(ctx, apierr.New(apierr.Invalid, "ttl_seconds", "ttl_seconds should be from 1 to 604800 (7 days)"))
			return
		}
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	p := s.cfg.PKI
	switch {
	case p == nil || !p.Secure():
		writeError(ctx, apierr.New(apierr.IllegalStatus, "join_token", "this cluster's links are insecure (--insecure-cluster-links): a node joins with --join alone"))
		return
	case !p.CanIssue():
		writeError(ctx, apierr.New(apierr.IllegalStatus, "join_token", "this cluster's CA key is the operator's: issue node certificates with gatewayctl certs create-node and start the node with them"))
		return
	}
	tok := pki.NewToken(p.CAFingerprint())
	now := s.cfg.Now()
	// The token expires at the whole second its answer names (expires_at
	// is RFC 3339 in seconds), never later than the operator was told.
	expires := now.Add(ttl).Truncate(time.Second)
	rec := &command.JoinToken{ID: tok.ID, SecretHash: tok.SecretHash(), CreatedAt: now.UnixNano(), ExpiresAt: expires.UnixNano()}
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.cfg.Cluster.Propose(cctx, &command.Cmd{JoinToken: rec})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, s.errorFor("join token", err))
		return
	}
	writeJSON(ctx, 200, map[string]string{"join_token": tok.String(), "expires_at": time.Unix(0, rec.ExpiresAt).UTC().Format(time.RFC3339)})
}

// PeerClient asks other members over the cluster port.
type PeerClient struct{ c *fasthttp.Client }

// NewPeerClient makes a client that dials with dial.
func NewPeerClient(dial PeerDialer) *PeerClient {
	return &PeerClient{c: &fasthttp.Client{
		Name:                     "gatewayd-peer",
		NoDefaultUserAgentHeader: true,
		MaxIdleConnDuration:      10 * time.Second,
		Dial:                     func(addr string) (net.Conn, error) { return dial(addr, forwardDialTimeout) },
	}}
}

// Self asks the member at raftAddr for its raft view.
func (p *PeerClient) Self(raftAddr string, digest bool, timeout time.Duration) (*cluster.SelfStatus, error) {
	uri := "http://" + raftAddr + "/peer/v1/self"
	if digest {
		uri += "?digest=1"
	}
	var st cluster.SelfStatus
	if err := p.do(fasthttp.MethodGet, uri, nil, timeout, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Join asks the member at raftAddr (any: a follower forwards it) to add m.
func (p *PeerClient) Join(raftAddr string, m command.Member, timeout time.Duration) error {
	body := mustJSON(joinRequest{NodeID: m.NodeID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr})
	return p.do(fasthttp.MethodPost, "http://"+raftAddr+"/peer/v1/join", body, timeout, nil)
}

func (p *PeerClient) do(method, uri string, body []byte, timeout time.Duration, out any) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(uri)
	req.Header.SetMethod(method)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	if err := p.c.DoTimeout(req, resp, timeout); err != nil {
		return err
	}
	if resp.StatusCode() != 200 {
		return fmt.Errorf("member answered HTTP %d: %s", resp.StatusCode(), strings.TrimSpace(string(resp.Body())))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(resp.Body(), out)
}

// RequestCert asks a member's cluster port for a node certificate with a
// join token, over a join connection conn (link.DialJoin, which checked the
// member's certificate against the CA the token pins). It returns the
// answer, or the member's refusal as an error.
func RequestCert(conn net.Conn, req CertRequest, timeout time.Duration) (*CertAnswer, error) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	body := mustJSON(req)
	hreq := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(hreq)
	hreq.SetRequestURI("http://cluster/join")
	hreq.Header.SetMethod(fasthttp.MethodPost)
	hreq.Header.SetContentType("application/json")
	hreq.SetBody(body)
	w := bufio.NewWriter(conn)
	if err := hreq.Write(w); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		return nil, err
	}
	if resp.StatusCode() != 200 {
		return nil, &RefusedError{Status: resp.StatusCode(), Body: strings.TrimSpace(string(resp.Body()))}
	}
	var out CertAnswer
	if err := json.Unmarshal(resp.Body(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RefusedError is a member's refusal of a join: retrying will not help.
type RefusedError struct {
	Status int
	Body   string
}

func (e *RefusedError) Error() string {
	var b struct {
		Error struct {
			Code     string              `json:"code"`
			Messages map[string][]string `json:"messages"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(e.Body), &b) == nil && b.Error.Code != "" {
		var msgs []string
		for attr, m := range b.Error.Messages {
			msgs = append(msgs, attr+": "+strings.Join(m, "; "))
		}
		return fmt.Sprintf("%d %s: %s", e.Status, b.Error.Code, strings.Join(msgs, ", "))
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body)
}

// IsRefused reports whether err is a member's refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
