package node

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// The node's identity on the cluster port (docs/security.md):
//
//   - --insecure-cluster-links: none (plain TCP; loopback only, checked by
//     Config.Validate, and a warning at every start).
//   - --cluster-ca-file, --node-cert-file, --node-key-file: the operator's.
//   - otherwise <data-dir>/tls: made by the node itself. The bootstrapping
//     node makes the cluster CA there (ca.key, mode 0600) and issues its own
//     certificate; a joining node receives one through its join token
//     (join.go). Every later start reads what is there, and renews the
//     node certificate when it is close to expiring (pki.NeedsRenewal) or
//     no longer names --raft-addr's host.
//
// The CA key also travels, sealed under the vault key, through the log
// (command.ClusterCA), so that any member, and so any later leader,
// can check a join and issue a certificate.

// caKeyAAD binds the sealed CA key to its purpose.
var caKeyAAD = []byte("cluster-ca-key")

// clusterPKI is the node's side of the cluster's certificates; the front
// end's join routes reach it through server.ClusterPKI.
type clusterPKI struct {
	ca    *pki.CA // Key nil when this node does not hold it (yet)
	store *persistence.Store
	open  func(blob, aad []byte) ([]byte, error)
	mu    sync.Mutex
}

// Secure reports whether the cluster links run under TLS.
func (p *clusterPKI) Secure() bool { return p != nil && p.ca != nil }

// CAFingerprint is the cluster CA's SHA-256 fingerprint.
func (p *clusterPKI) CAFingerprint() string { return p.ca.Fingerprint() }

// CACertPEM is the cluster CA certificate.
func (p *clusterPKI) CACertPEM() []byte { return p.ca.CertPEM() }

// errNoCAKey: the cluster's CA key is nowhere this node can read it.
var errNoCAKey = errors.New("the cluster CA's key is not in this node's store: not yet (the first leader writes it into the log), or the CA is an operator's (issue node certificates with gatewayctl certs create-node)")

// signer returns the CA with its key: this node's own, or the one
// replicated sealed through the log.
func (p *clusterPKI) signer() (*pki.CA, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ca.Key != nil {
		return p.ca, nil
	}
	rec, err := p.store.ClusterCA()
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errNoCAKey
	}
	cert, err := pki.ParseCert([]byte(rec.CertPEM))
	if err != nil || !cert.Equal(p.ca.Cert) {
		return nil, errors.New("the replicated cluster CA is not the one this node trusts")
	}
	keyPEM, err := p.open(rec.SealedKey, caKeyAAD)
	if err != nil {
		return nil, fmt.Errorf("open the replicated CA key: %w", err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	p.ca = &pki.CA{Cert: p.ca.Cert, Key: key}
	return p.ca, nil
}

// CanIssue reports whether this node can sign node certificates.
func (p *clusterPKI) CanIssue() bool {
	_, err := p.signer()
	return err == nil
}

// IssueNodeCert signs a joiner's certificate request.
func (p *clusterPKI) IssueNodeCert(csrPEM []byte, nodeID string, hosts []string) ([]byte, error) {
	ca, err := p.signer()
	if err != nil {
		return nil, err
	}
	cert, err := ca.IssueCSR(csrPEM, nodeID, hosts)
	if err != nil {
		return nil, err
	}
	return pki.CertPEM(cert), nil
}

// replicateCA writes this node's CA key, sealed, into the log once (the
// leader calls it at the start of its term).
func (n *Node) replicateCA(ctx context.Context) {
	p := n.pki
	if !p.Secure() || p.ca.Key == nil {
		return
	}
	if rec, err := n.store.ClusterCA(); err != nil || rec != nil {
		return
	}
	keyPEM, err := pki.KeyPEM(p.ca.Key)
	if err != nil {
		n.logger.Error("cluster CA key", "error", err)
		return
	}
	sealed, err := n.vault.Seal(keyPEM, caKeyAAD)
	if err != nil {
		n.logger.Error("seal the cluster CA key", "error", err)
		return
	}
	res, err := n.raft.Propose(ctx, &command.Cmd{ClusterCA: &command.ClusterCA{CertPEM: string(p.ca.CertPEM()), SealedKey: sealed}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		n.logger.Warn("replicate the cluster CA", "error", err)
	}
}

// hasRaftLog reports whether the raft log folder holds anything: the data
// dir is a member's, not a new node's.
func (c Config) hasRaftLog() bool {
	dir := c.RaftLogDir
	if dir == "" {
		dir = filepath.Join(c.DataDir, "raft", "wal")
	}
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// tlsDir is where a node keeps the certificates it made or was issued.
func (c Config) tlsDir() string { return filepath.Join(c.DataDir, "tls") }

// clusterIdentity sets up n.pki and returns the link's TLS (nil when the
// links are insecure). A new node with --join obtains its certificate here
// (join.go), before raft starts.
func (n *Node) clusterIdentity() (*link.TLS, error) {
	cfg := n.cfg
	if cfg.InsecureClusterLinks {
		n.logger.Warn("cluster links are NOT encrypted or authenticated (--insecure-cluster-links): anyone who can reach --raft-addr controls the cluster; use only for a cluster whose every node is on this machine",
			"raft_addr", cfg.RaftAddr)
		n.pki = &clusterPKI{store: n.store, open: n.vault.Open}
		return nil, nil
	}
	if cfg.ClusterCAFile != "" {
		return n.operatorIdentity()
	}
	dir := cfg.tlsDir()
	if cfg.RestoreFile != "" {
		return n.restoredIdentity(dir) // backup.go
	}
	if _, err := os.Stat(filepath.Join(dir, pki.NodeCertFile)); err == nil {
		return n.storedIdentity(dir)
	}
	// ca.crt without node.crt: a member whose node key was deleted on
	// purpose (docs/security.md, rotation).
	if _, err := os.Stat(filepath.Join(dir, pki.CACertFile)); err == nil {
		return n.reissueIdentity(dir)
	}
	// The store's applied index is no guide here: after a kill it may be
	// behind until raft replays its log. The log itself says.
	if cfg.hasRaftLog() {
		return nil, fmt.Errorf("%s holds no node certificate, but %s holds a member's state: put the node's tls folder back, or empty the data dir and join again with a join token", dir, cfg.DataDir)
	}
	if cfg.Join == "" {
		return n.bootstrapIdentity(dir)
	}
	return n.joinIdentity(dir) // join.go
}

// operatorIdentity loads the operator's CA and node certificate.
func (n *Node) operatorIdentity() (*link.TLS, error) {
	cfg := n.cfg
	ca, err := pki.LoadCA(cfg.ClusterCAFile, "")
	if err != nil {
		return nil, fmt.Errorf("--cluster-ca-file: %w", err)
	}
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	t, cert, err := loadNodeTLS(ca, cfg.NodeCertFile, cfg.NodeKeyFile)
	if err != nil {
		return nil, err
	}
	n.warnExpiry(cert)
	return t, nil
}

// storedIdentity loads <data-dir>/tls and renews the node certificate when
// it is due and the CA key is at hand.
func (n *Node) storedIdentity(dir string) (*link.TLS, error) {
	keyFile := filepath.Join(dir, pki.CAKeyFile)
	if _, err := os.Stat(keyFile); err != nil {
		keyFile = ""
	}
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), keyFile)
	if err != nil {
		return nil, err
	}
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	certFile, nodeKeyFile := filepath.Join(dir, pki.NodeCertFile), filepath.Join(dir, pki.NodeKeyFile)
	t, cert, err := loadNodeTLS(ca, certFile, nodeKeyFile)
	if err != nil {
		return nil, err
	}
	switch renewed, err := n.renewNodeCert(&t.Cert); {
	case err != nil:
		// The CA key may reach this node's store only once raft has
		// replayed the log: renewLoop tries again while the node runs.
		n.logger.Warn("the node certificate is due for renewal (or no longer names --advertise-raft-addr) but this node cannot sign one yet: " + err.Error())
		n.warnExpiry(cert)
	case renewed != nil:
		t.Cert = *renewed
	}
	return t, nil
}

// renewCheckEvery is how often a running node looks at its certificate;
// renewRetry how soon it tries again when it could not sign.
const (
	renewCheckEvery = time.Hour
	renewRetry      = 5 * time.Second
)

// renewLoop renews the certificate of a node that made its own (or was
// issued one with a join token) while it runs: one that was due at start
// but could not be signed yet (the replicated CA key not yet in its
// store), and one that falls due after months of uptime. The link serves
// the new certificate to the handshakes that follow.
func (n *Node) renewLoop() {
	defer n.bg.Done()
	wait, warned := renewRetry, false
	for {
		select {
		case <-n.stopLeader:
			return
		case <-time.After(wait):
		}
		wait = renewCheckEvery
		renewed, err := n.renewNodeCert(n.clusterLink.Certificate())
		switch {
		case err != nil:
			if !warned {
				n.logger.Warn("node certificate renewal", "error", err)
				warned = true
			}
			wait = renewRetry
		case renewed != nil:
			n.clusterLink.SetCertificate(*renewed)
		}
	}
}

// renewNodeCert issues this node a new certificate for its key, writes it
// to <data-dir>/tls and returns it, when cur is due (pki.NeedsRenewal),
// names another node id, or no longer names --advertise-raft-addr's host.
// It returns nil when cur is fine.
func (n *Node) renewNodeCert(cur *tls.Certificate) (*tls.Certificate, error) {
	leaf := cur.Leaf
	hosts := pki.HostsOf(n.cfg.AdvertiseRaftAddr)
	if !pki.NeedsRenewal(leaf, time.Now()) && leaf.VerifyHostname(hosts[0]) == nil && leaf.Subject.CommonName == n.cfg.NodeID {
		return nil, nil
	}
	signer, err := n.pki.signer()
	if err != nil {
		return nil, err
	}
	renewed, err := signer.Issue(n.cfg.NodeID, hosts, cur.PrivateKey.(crypto.Signer).Public())
	if err != nil {
		return nil, fmt.Errorf("renew the node certificate: %w", err)
	}
	if err := pki.WriteFile(n.cfg.tlsDir(), pki.NodeCertFile, pki.CertPEM(renewed), 0o644, true); err != nil {
		return nil, err
	}
	n.logger.Info("node certificate renewed", "not_after", renewed.NotAfter.UTC().Format(time.RFC3339), "previous_not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return &tls.Certificate{Certificate: [][]byte{renewed.Raw}, PrivateKey: cur.PrivateKey, Leaf: renewed}, nil
}

// reissueIdentity gives a member whose node.crt and node.key were deleted
// (to replace a key that may have leaked) a new key and certificate,
// signed with the CA key replicated through the log.
func (n *Node) reissueIdentity(dir string) (*link.TLS, error) {
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), "")
	if err != nil {
		return nil, err
	}
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	signer, err := n.pki.signer()
	if err != nil {
		return nil, fmt.Errorf("%s holds no node certificate and this node cannot sign one (%v): if it was killed, start it once with its old node.crt and node.key and stop it with SIGTERM first; or remove the node, empty its data dir and join it again with a join token", dir, err)
	}
	cert, key, err := signer.NewNode(n.cfg.NodeID, pki.HostsOf(n.cfg.AdvertiseRaftAddr))
	if err != nil {
		return nil, err
	}
	if err := pki.WriteNode(dir, cert, key, true); err != nil {
		return nil, err
	}
	n.logger.Info("issued this node a new key and certificate (node.crt and node.key were missing)", "not_after", cert.NotAfter.UTC().Format(time.RFC3339))
	return loadNodeTLSFrom(ca, dir)
}

// bootstrapIdentity makes the cluster's CA and this node's certificate.
func (n *Node) bootstrapIdentity(dir string) (*link.TLS, error) {
	ca, err := pki.NewCA("paygate cluster CA (" + n.cfg.NodeID + ")")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.NewNode(n.cfg.NodeID, pki.HostsOf(n.cfg.AdvertiseRaftAddr))
	if err != nil {
		return nil, err
	}
	if err := pki.WriteCA(dir, ca, false); err != nil {
		return nil, err
	}
	if err := pki.WriteNode(dir, cert, key, false); err != nil {
		return nil, err
	}
	n.logger.Info("made the cluster CA and this node's certificate", "dir", dir, "ca_fingerprint", ca.Fingerprint())
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	return loadNodeTLSFrom(ca, dir)
}

func loadNodeTLSFrom(ca *pki.CA, dir string) (*link.TLS, error) {
	t, _, err := loadNodeTLS(ca, filepath.Join(dir, pki.NodeCertFile), filepath.Join(dir, pki.NodeKeyFile))
	return t, err
}

// loadNodeTLS reads a node's certificate and key and checks that the CA
// signed it for both ends of a link.
func loadNodeTLS(ca *pki.CA, certFile, keyFile string) (*link.TLS, *x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("node certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, nil, fmt.Errorf("node certificate %s is not valid under the cluster CA: %w", certFile, err)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return nil, nil, fmt.Errorf("node certificate %s must allow both server and client authentication", certFile)
	}
	pair.Leaf = cert
	return &link.TLS{CA: ca.Pool(), Cert: pair}, cert, nil
}

// warnExpiry logs, at every start, a certificate this node cannot renew
// itself and that is close to its end.
func (n *Node) warnExpiry(cert *x509.Certificate) {
	if pki.NeedsRenewal(cert, time.Now()) {
		n.logger.Warn("the node certificate expires soon: issue a new one (gatewayctl certs create-node) and restart the node",
			"not_after", cert.NotAfter.UTC().Format(time.RFC3339))
	}
}
