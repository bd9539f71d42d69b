// Package pki makes and checks the certificates of the cluster links: the
// cluster's certificate authority (CA), each node's certificate, and the
// join tokens that let a new node obtain one without copying files by hand
// (docs/security.md).
//
// Keys are ECDSA P-256. A node certificate names the node id as its common
// name and the hosts of its --raft-addr as subject alternative names; it is
// both a server and a client certificate, since every node dials and is
// dialled. Nothing here does I/O beyond reading and writing PEM files.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Lifetimes. A node certificate is renewed at start once less than
// RenewBefore of it is left (docs/cluster.md, "Certificates").
const (
	CAValidity       = 10 * 365 * 24 * time.Hour
	NodeCertValidity = 365 * 24 * time.Hour
	RenewBefore      = 60 * 24 * time.Hour
)

// File names inside a certificate directory (<data-dir>/tls, or the one
// gatewayctl certs writes).
const (
	CACertFile   = "ca.crt"
	CAKeyFile    = "ca.key"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// CA is the cluster's certificate authority. Key is nil on a node that
// only trusts it (an operator's CA whose key stays with the operator).
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// Also are more CAs trusted beside Cert (a CA file holding several):
	// during a rotation of the CA, nodes trust the old and the new one.
	Also []*x509.Certificate
}

// NewCA makes a self-signed CA.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"paygate cluster"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Fingerprint is the lowercase hex SHA-256 of the CA certificate's DER
// bytes: what a join token pins.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert) }

// Fingerprint is the lowercase hex SHA-256 of a certificate's DER bytes.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte { return CertPEM(ca.Cert) }

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	for _, c := range ca.Also {
		p.AddCert(c)
	}
	return p
}

// NewNodeKey makes a node's private key.
func NewNodeKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// Issue signs a node certificate for pub: common name nodeID, the given
// hosts (IP addresses or DNS names) as alternative names.
func (ca *CA) Issue(nodeID string, hosts []string, pub crypto.PublicKey) (*x509.Certificate, error) {
	if ca.Key == nil {
		return nil, errors.New("pki: this node does not hold the cluster CA's key")
	}
	if nodeID == "" {
		return nil, errors.New("pki: a node certificate needs a node id")
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: nodeID, Organization: []string{"paygate cluster"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(NodeCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// NewNode makes a node key and its certificate (nodeID, hosts as Issue).
func (ca *CA) NewNode(nodeID string, hosts []string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := NewNodeKey()
	if err != nil {
		return nil, nil, err
	}
	cert, err := ca.Issue(nodeID, hosts, key.Public())
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// TLSCertificate pairs a certificate with its key for crypto/tls.
func TLSCertificate(cert *x509.Certificate, key crypto.Signer) tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// IssueCSR checks a certificate request's signature and issues a node
// certificate for its key. The names come from the caller (the join it
// answers), not from the request.
func (ca *CA) IssueCSR(csrPEM []byte, nodeID string, hosts []string) (*x509.Certificate, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("pki: not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("pki: certificate request signature: %w", err)
	}
	return ca.Issue(nodeID, hosts, csr.PublicKey)
}

// NewCSR makes a PEM certificate request for key.
func NewCSR(key *ecdsa.PrivateKey, nodeID string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeID}}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// HostsOf returns the host of each host:port (a bare host as is), for a
// certificate's alternative names.
func HostsOf(addrs ...string) []string {
	var out []string
	for _, a := range addrs {
		h, _, err := net.SplitHostPort(a)
		if err != nil {
			h = a
		}
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// CertPEM encodes a certificate.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM encodes a private key (PKCS #8).
func KeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCert reads the first certificate of a PEM file's bytes.
func ParseCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("pki: no PEM certificate found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// ParseKey reads a PEM private key (PKCS #8, EC or PKCS #1).
func ParseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("pki: no PEM private key found")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("pki: the key cannot sign")
		}
		return s, nil
	}
}

// LoadCA reads a CA certificate and, when keyFile is not empty, its key.
// Further certificates in the file are trusted too (CA.Also).
func LoadCA(certFile, keyFile string) (*CA, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%s: %s is not a CA certificate", certFile, c.Subject.CommonName)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate found", certFile)
	}
	ca := &CA{Cert: certs[0], Also: certs[1:]}
	if keyFile != "" {
		kdata, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, err
		}
		if ca.Key, err = ParseKey(kdata); err != nil {
			return nil, fmt.Errorf("%s: %w", keyFile, err)
		}
	}
	return ca, nil
}

// WriteFile writes data to dir/name with mode (0600 for keys), creating dir
// (0700). It refuses to replace a file unless replace is set.
func WriteFile(dir, name string, data []byte, mode os.FileMode, replace bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if !replace {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s exists: not replacing it", path)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteCA writes ca.crt and ca.key (0600) into dir.
func WriteCA(dir string, ca *CA, replace bool) error {
	key, err := KeyPEM(ca.Key)
	if err != nil {
		return err
	}
	if err := WriteFile(dir, CAKeyFile, key, 0o600, replace); err != nil {
		return err
	}
	return WriteFile(dir, CACertFile, ca.CertPEM(), 0o644, replace)
}

// WriteNode writes node.crt and node.key (0600) into dir.
func WriteNode(dir string, cert *x509.Certificate, key crypto.Signer, replace bool) error {
	kp, err := KeyPEM(key)
	if err != nil {
		return err
	}
	if err := WriteFile(dir, NodeKeyFile, kp, 0o600, replace); err != nil {
		return err
	}
	return WriteFile(dir, NodeCertFile, CertPEM(cert), 0o644, replace)
}

// CreateCAFiles makes a new CA named name and writes dir/ca.crt and
// dir/ca.key (mode 600), refusing to replace them: gatewayctl certs create-ca.
func CreateCAFiles(dir, name string) (*CA, error) {
	ca, err := NewCA(name)
	if err != nil {
		return nil, err
	}
	return ca, WriteCA(dir, ca, false)
}

// CreateNodeFiles signs, with the CA in dir (ca.crt and ca.key), a new key
// and certificate for nodeID naming hosts, and writes them as
// dir/<nodeID>.crt and dir/<nodeID>.key (mode 600), replacing older ones:
// gatewayctl certs create-node.
func CreateNodeFiles(dir, nodeID string, hosts []string) (*x509.Certificate, error) {
	ca, err := LoadCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.NewNode(nodeID, hosts)
	if err != nil {
		return nil, err
	}
	keyPEM, err := KeyPEM(key)
	if err != nil {
		return nil, err
	}
	if err := WriteFile(dir, nodeID+".key", keyPEM, 0o600, true); err != nil {
		return nil, err
	}
	return cert, WriteFile(dir, nodeID+".crt", CertPEM(cert), 0o644, true)
}

// NeedsRenewal reports whether a certificate has less than RenewBefore (or
// a third of its lifetime, when shorter) left at now.
func NeedsRenewal(c *x509.Certificate, now time.Time) bool {
	before := min(RenewBefore, c.NotAfter.Sub(c.NotBefore)/3)
	return now.Add(before).After(c.NotAfter)
}
