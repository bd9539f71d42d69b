package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/transport/server"
)

// A new node joins in two steps (docs/security.md, "Joining"):
//
//  1. GET /cluster/v1/join-info from --join, the one request a node ever
//     sends to another's HTTP listener: the member's cluster port and the
//     cluster CA. Nothing in it is secret, and nothing in it is trusted:
//     the CA must have the fingerprint the join token names.
//  2. Over a join connection to that cluster port (TLS, the member's
//     certificate checked against that CA), the token and a certificate
//     request; the member checks the token and answers a node certificate.
//
// From then on the node is a member on the cluster port like any other:
// maintainMembership (cluster.go) asks the leader there to add it.

// joinInfoWait bounds how long a new node waits for --join to answer at
// all (it may be starting too); a refusal ends the wait at once.
const joinInfoWait = 30 * time.Second

// errNeedToken is a new node started with --join and no token.
var errNeedToken = errors.New("--join on a new data dir needs --join-token (or GATEWAY_JOIN_TOKEN): make one on any member with gatewayctl cluster join-token; " +
	"or give the node a certificate of the cluster CA with --cluster-ca-file, --node-cert-file and --node-key-file")

// joinIdentity obtains this node's certificate with its join token.
func (n *Node) joinIdentity(dir string) (*link.TLS, error) {
	if n.cfg.JoinToken == "" {
		return nil, errNeedToken
	}
	tok, err := pki.ParseToken(n.cfg.JoinToken)
	if err != nil {
		return nil, fmt.Errorf("--join-token: %w", err)
	}
	info, err := n.joinInfo()
	if err != nil {
		return nil, err
	}
	if info.Insecure {
		return nil, fmt.Errorf("the cluster at %s runs its links without TLS (--insecure-cluster-links): start this node with --insecure-cluster-links too, or the cluster with TLS", n.cfg.Join)
	}
	caCert, err := pki.ParseCert([]byte(info.CACert))
	if err != nil {
		return nil, fmt.Errorf("join: the CA sent by %s: %w", n.cfg.Join, err)
	}
	if got := pki.Fingerprint(caCert); got != tok.CAFingerprint {
		return nil, fmt.Errorf("join refused: the cluster at %s has CA fingerprint %s, but the join token names %s: the token is for another cluster, or something answers in the cluster's place", n.cfg.Join, got, tok.CAFingerprint)
	}
	ca := &pki.CA{Cert: caCert}
	key, err := pki.NewNodeKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.NewCSR(key, n.cfg.NodeID)
	if err != nil {
		return nil, err
	}
	conn, err := link.DialJoin(info.RaftAddr, ca.Pool(), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("join: the cluster port %s of %s: %w", info.RaftAddr, n.cfg.Join, err)
	}
	ans, err := server.RequestCert(conn, server.CertRequest{
		JoinToken: tok.String(), NodeID: n.cfg.NodeID, RaftAddr: n.cfg.AdvertiseRaftAddr, HTTPAddr: n.cfg.AdvertiseHTTPAddr, CSR: string(csr),
	}, 20*time.Second)
	if err != nil {
		return nil, fmt.Errorf("join refused by %s: %w", info.RaftAddr, err)
	}
	cert, err := pki.ParseCert([]byte(ans.NodeCert))
	if err != nil {
		return nil, fmt.Errorf("join: the issued certificate: %w", err)
	}
	if err := cert.CheckSignatureFrom(caCert); err != nil || cert.Subject.CommonName != n.cfg.NodeID {
		return nil, errors.New("join: the issued certificate is not this node's under the pinned CA")
	}
	if err := pki.WriteFile(dir, pki.CACertFile, ca.CertPEM(), 0o644, false); err != nil {
		return nil, err
	}
	if err := pki.WriteNode(dir, cert, key, false); err != nil {
		return nil, err
	}
	n.joinRaft = info.RaftAddr
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	n.logger.Info("node certificate received with the join token", "member", info.RaftAddr, "ca_fingerprint", tok.CAFingerprint)
	return loadNodeTLSFrom(ca, dir)
}

// joinInfoClient asks --join for the join info. The answer is checked
// against the token's fingerprint, not against the HTTP listener's
// certificate, which may be one a public CA issued for merchants.
var joinInfoClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the CA in the answer is pinned by the token
}}

// joinInfo asks --join for its cluster port and CA, retrying while
// nothing answers.
func (n *Node) joinInfo() (*server.JoinInfo, error) {
	deadline := time.Now().Add(joinInfoWait)
	for {
		info, err := getJoinInfo(n.joinInfoURL())
		if err == nil {
			return info, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("join: %s does not answer: %w", n.cfg.Join, err)
		}
		select {
		case <-n.stopLeader:
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func getJoinInfo(url string) (*server.JoinInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := joinInfoClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	var info server.JoinInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
