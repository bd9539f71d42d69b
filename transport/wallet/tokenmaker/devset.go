// Package tokenmaker makes valid walleta-pay and walletb-pay tokens for
// tests, docs and load: it plays the wallet provider (root CA, intermediate,
// signing certificate; root and intermediate signing keys) and the device
// (encryption to the merchant's or gateway's public key).
//
// A development set (DevSet) is a directory of PEM, JSON and text files,
// named by the File* constants, that a node started with --dev points its
// wallet flags at:
//
//	--walleta-merchant-id          contents of FileWalletAMerchantID
//	--walleta-processing-key-file  FileWalletAProcessingKeys (EC and RSA key)
//	--walleta-root-cert-file       FileWalletARootCert
//	--walletb-recipient-id         contents of FileWalletBRecipientID
//	--walletb-private-key-file     FileWalletBRecipientKey
//	--walletb-root-keys-file       FileWalletBRootKeys
//
// The private keys of the provider side are in the set too, so anything that
// loads it (the bench harness, tests) can make tokens the node accepts.
// Development only: the keys are written unencrypted.
package tokenmaker

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// DevDirName is the suggested directory of the development set under the
// node's data dir.
const DevDirName = "wallet-dev"

// Files of a development set. Keys are PEM PKCS#8 ("PRIVATE KEY") except
// FileWalletBRecipientKey, which is SEC1 ("EC PRIVATE KEY").
const (
	FileWalletARootCert         = "walleta-root-cert.pem"          // --walleta-root-cert-file
	FileWalletARootKey          = "walleta-root-key.pem"           // provider side
	FileWalletAIntermediateCert = "walleta-intermediate-cert.pem"  // carries walleta.OIDIntermediateMarker
	FileWalletAIntermediateKey  = "walleta-intermediate-key.pem"   // provider side
	FileWalletALeafCert         = "walleta-leaf-cert.pem"          // signing certificate, carries walleta.OIDLeafMarker
	FileWalletALeafKey          = "walleta-leaf-key.pem"           // provider side: signs tokens
	FileWalletAProcessingKeyEC  = "walleta-processing-key-ec.pem"  // EC P-256, EC_v1
	FileWalletAProcessingKeyRSA = "walleta-processing-key-rsa.pem" // RSA 2048, RSA_v1
	FileWalletAProcessingKeys   = "walleta-processing-keys.pem"    // both keys: --walleta-processing-key-file
	FileWalletAMerchantID       = "walleta-merchant-id.txt"        // --walleta-merchant-id (one line)

	FileWalletBRootKeys        = "walletb-root-keys.json"       // --walletb-root-keys-file: {"keys":[ECv1, ECv2]}
	FileWalletBRootKeyECv1     = "walletb-root-key-ecv1.pem"    // provider side
	FileWalletBRootKeyECv2     = "walletb-root-key-ecv2.pem"    // provider side
	FileWalletBIntermediateKey = "walletb-intermediate-key.pem" // provider side: ECv2 intermediate signing key
	FileWalletBRecipientKey    = "walletb-recipient-key.pem"    // --walletb-private-key-file
	FileWalletBRecipientID     = "walletb-recipient-id.txt"     // --walletb-recipient-id (one line)
)

// Defaults of a generated set.
const (
	DefaultMerchantID  = "merchant.dev.paygate.gateway"
	DefaultRecipientID = "gateway:paygate-dev"
	DefaultValidity    = 50 * 365 * 24 * time.Hour
)

// DevSet is a development set. Either half may be nil when loaded from a
// directory holding only the other half's files.
type DevSet struct {
	Dir string
	// Now is the clock for token defaults (signing time, expirations);
	// nil means time.Now.
	Now func() time.Time
	A   *WalletADev
	B   *WalletBDev
}

// WalletADev is the walleta-pay half.
type WalletADev struct {
	RootCert         *x509.Certificate
	RootKey          crypto.Signer
	IntermediateCert *x509.Certificate
	IntermediateKey  crypto.Signer
	LeafCert         *x509.Certificate
	LeafKey          crypto.Signer // EC (or RSA) key of LeafCert
	ProcessingKeyEC  *ecdsa.PrivateKey
	ProcessingKeyRSA *rsa.PrivateKey
	MerchantID       string
}

// WalletBDev is the walletb-pay half.
type WalletBDev struct {
	RootKeys        map[string]*ecdsa.PrivateKey // by protocol version
	RootKeyList     []walletb.RootKey            // as FileWalletBRootKeys lists them
	IntermediateKey *ecdsa.PrivateKey
	RecipientKey    *ecdsa.PrivateKey
	RecipientID     string
}

// Options tune GenerateDevSetWith. Zero values take the defaults.
type Options struct {
	Now         time.Time     // start of validity (minus an hour); default time.Now
	Validity    time.Duration // certificates and root keys; default DefaultValidity
	MerchantID  string        // default DefaultMerchantID
	RecipientID string        // default DefaultRecipientID
	RSABits     int           // default 2048
}

// GenerateDevSet makes a new development set with default options and
// writes it under dir.
func GenerateDevSet(dir string) (*DevSet, error) {
	return GenerateDevSetWith(dir, Options{})
}

// LoadOrGenerateDevSet loads the set under dir, or generates and writes one
// when dir holds none (what --dev does on every start).
func LoadOrGenerateDevSet(dir string) (*DevSet, error) {
	_, errA := os.Stat(filepath.Join(dir, FileWalletAMerchantID))
	_, errB := os.Stat(filepath.Join(dir, FileWalletBRecipientID))
	if errA == nil || errB == nil {
		return LoadDevSet(dir)
	}
	return GenerateDevSet(dir)
}

// GenerateDevSetWith makes a new development set and, when dir is not
// empty, writes it there.
func GenerateDevSetWith(dir string, o Options) (*DevSet, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Validity <= 0 {
		o.Validity = DefaultValidity
	}
	if o.MerchantID == "" {
		o.MerchantID = DefaultMerchantID
	}
	if o.RecipientID == "" {
		o.RecipientID = DefaultRecipientID
	}
	if o.RSABits == 0 {
		o.RSABits = 2048
	}
	notBefore := o.Now.Add(-time.Hour).Truncate(time.Second)
	notAfter := o.Now.Add(o.Validity).Truncate(time.Second)

	a := &WalletADev{MerchantID: o.MerchantID}
	var err error
	if a.RootCert, a.RootKey, err = IssueCert(CertSpec{
		CommonName: "walleta-pay Dev Root CA - G3", CA: true, NotBefore: notBefore, NotAfter: notAfter,
	}, nil, nil); err != nil {
		return nil, err
	}
	if a.IntermediateCert, a.IntermediateKey, err = IssueCert(CertSpec{
		CommonName: "walleta-pay Dev Application Integration CA - G3", CA: true,
		Marker: walleta.OIDIntermediateMarker, NotBefore: notBefore, NotAfter: notAfter,
	}, a.RootCert, a.RootKey); err != nil {
		return nil, err
	}
	if a.LeafCert, a.LeafKey, err = IssueCert(CertSpec{
		CommonName: "walleta-pay dev ecc-smp-broker-sign", Marker: walleta.OIDLeafMarker,
		NotBefore: notBefore, NotAfter: notAfter,
	}, a.IntermediateCert, a.IntermediateKey); err != nil {
		return nil, err
	}
	if a.ProcessingKeyEC, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if a.ProcessingKeyRSA, err = rsa.GenerateKey(rand.Reader, o.RSABits); err != nil {
		return nil, err
	}

	b := &WalletBDev{RootKeys: map[string]*ecdsa.PrivateKey{}, RecipientID: o.RecipientID}
	for _, v := range []string{walletb.VersionECv1, walletb.VersionECv2} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		spki, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			return nil, err
		}
		b.RootKeys[v] = k
		b.RootKeyList = append(b.RootKeyList, walletb.RootKey{
			KeyValue:        base64.StdEncoding.EncodeToString(spki),
			ProtocolVersion: v,
			KeyExpiration:   strconv.FormatInt(notAfter.UnixMilli(), 10),
		})
	}
	if b.IntermediateKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if b.RecipientKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	ds := &DevSet{Dir: dir, A: a, B: b}
	if dir != "" {
		if err := ds.Write(dir); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// CertSpec describes a certificate IssueCert makes.
type CertSpec struct {
	CommonName          string
	CA                  bool
	Marker              asn1.ObjectIdentifier // added as a non-critical extension holding NULL, when set
	NotBefore, NotAfter time.Time
	Key                 crypto.Signer // the subject key; nil: a new EC P-256 key
}

// IssueCert makes a certificate signed by parent/parentKey, or self-signed
// when parent is nil, and returns it with the subject key.
func IssueCert(spec CertSpec, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, crypto.Signer, error) {
	key := spec.Key
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		key = k
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         spec.CommonName,
			OrganizationalUnit: []string{"paygate development"},
			Organization:       []string{"paygate"},
			Country:            []string{"US"},
		},
		NotBefore:             spec.NotBefore,
		NotAfter:              spec.NotAfter,
		BasicConstraintsValid: true,
		IsCA:                  spec.CA,
		KeyUsage:              x509.KeyUsageDigitalSignature,
	}
	if spec.CA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	if spec.Marker != nil {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: spec.Marker, Value: []byte{0x05, 0x00}}}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// Write writes the set's halves (those not nil) under dir.
func (ds *DevSet) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	put := func(name string, data []byte, secret bool) error {
		mode := os.FileMode(0o644)
		if secret {
			mode = 0o600
		}
		return os.WriteFile(filepath.Join(dir, name), data, mode)
	}
	var errs []error
	if a := ds.A; a != nil {
		ec, err1 := pkcs8PEM(a.ProcessingKeyEC)
		rsaPEM, err2 := pkcs8PEM(a.ProcessingKeyRSA)
		rootKey, err3 := pkcs8PEM(a.RootKey)
		interKey, err4 := pkcs8PEM(a.IntermediateKey)
		leafKey, err5 := pkcs8PEM(a.LeafKey)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		errs = append(errs,
			put(FileWalletARootCert, certPEM(a.RootCert), false),
			put(FileWalletARootKey, rootKey, true),
			put(FileWalletAIntermediateCert, certPEM(a.IntermediateCert), false),
			put(FileWalletAIntermediateKey, interKey, true),
			put(FileWalletALeafCert, certPEM(a.LeafCert), false),
			put(FileWalletALeafKey, leafKey, true),
			put(FileWalletAProcessingKeyEC, ec, true),
			put(FileWalletAProcessingKeyRSA, rsaPEM, true),
			put(FileWalletAProcessingKeys, append(append([]byte{}, ec...), rsaPEM...), true),
			put(FileWalletAMerchantID, []byte(a.MerchantID+"\n"), false),
		)
	}
	if b := ds.B; b != nil {
		list, err := json.MarshalIndent(map[string][]walletb.RootKey{"keys": b.RootKeyList}, "", "  ")
		if err != nil {
			return err
		}
		k1, err1 := pkcs8PEM(b.RootKeys[walletb.VersionECv1])
		k2, err2 := pkcs8PEM(b.RootKeys[walletb.VersionECv2])
		ik, err3 := pkcs8PEM(b.IntermediateKey)
		sec1, err4 := x509.MarshalECPrivateKey(b.RecipientKey)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return err
		}
		errs = append(errs,
			put(FileWalletBRootKeys, append(list, '\n'), false),
			put(FileWalletBRootKeyECv1, k1, true),
			put(FileWalletBRootKeyECv2, k2, true),
			put(FileWalletBIntermediateKey, ik, true),
			put(FileWalletBRecipientKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), true),
			put(FileWalletBRecipientID, []byte(b.RecipientID+"\n"), false),
		)
	}
	return errors.Join(errs...)
}

// LoadDevSet reads a set written by Write. A half is loaded when its id
// file (FileWalletAMerchantID, FileWalletBRecipientID) exists; then all its
// files must be there.
func LoadDevSet(dir string) (*DevSet, error) {
	ds := &DevSet{Dir: dir}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	if id, err := read(FileWalletAMerchantID); err == nil {
		a, err := loadA(read, strings.TrimSpace(string(id)))
		if err != nil {
			return nil, fmt.Errorf("tokenmaker: walleta-pay dev set in %s: %w", dir, err)
		}
		ds.A = a
	}
	if id, err := read(FileWalletBRecipientID); err == nil {
		b, err := loadB(read, strings.TrimSpace(string(id)))
		if err != nil {
			return nil, fmt.Errorf("tokenmaker: walletb-pay dev set in %s: %w", dir, err)
		}
		ds.B = b
	}
	if ds.A == nil && ds.B == nil {
		return nil, fmt.Errorf("tokenmaker: no development set in %s", dir)
	}
	return ds, nil
}

func loadA(read func(string) ([]byte, error), merchantID string) (*WalletADev, error) {
	a := &WalletADev{MerchantID: merchantID}
	var err error
	if a.RootCert, err = loadCert(read, FileWalletARootCert); err != nil {
		return nil, err
	}
	if a.IntermediateCert, err = loadCert(read, FileWalletAIntermediateCert); err != nil {
		return nil, err
	}
	if a.LeafCert, err = loadCert(read, FileWalletALeafCert); err != nil {
		return nil, err
	}
	if a.RootKey, err = loadSigner(read, FileWalletARootKey); err != nil {
		return nil, err
	}
	if a.IntermediateKey, err = loadSigner(read, FileWalletAIntermediateKey); err != nil {
		return nil, err
	}
	if a.LeafKey, err = loadSigner(read, FileWalletALeafKey); err != nil {
		return nil, err
	}
	if a.ProcessingKeyEC, err = loadEC(read, FileWalletAProcessingKeyEC); err != nil {
		return nil, err
	}
	k, err := loadKey(read, FileWalletAProcessingKeyRSA)
	if err != nil {
		return nil, err
	}
	var ok bool
	if a.ProcessingKeyRSA, ok = k.(*rsa.PrivateKey); !ok {
		return nil, fmt.Errorf("%s: not an RSA key", FileWalletAProcessingKeyRSA)
	}
	return a, nil
}

func loadB(read func(string) ([]byte, error), recipientID string) (*WalletBDev, error) {
	b := &WalletBDev{RecipientID: recipientID, RootKeys: map[string]*ecdsa.PrivateKey{}}
	list, err := read(FileWalletBRootKeys)
	if err != nil {
		return nil, err
	}
	if b.RootKeyList, err = walletb.ParseRootKeys(list); err != nil {
		return nil, err
	}
	for v, name := range map[string]string{walletb.VersionECv1: FileWalletBRootKeyECv1, walletb.VersionECv2: FileWalletBRootKeyECv2} {
		if b.RootKeys[v], err = loadEC(read, name); err != nil {
			return nil, err
		}
	}
	if b.IntermediateKey, err = loadEC(read, FileWalletBIntermediateKey); err != nil {
		return nil, err
	}
	if b.RecipientKey, err = loadEC(read, FileWalletBRecipientKey); err != nil {
		return nil, err
	}
	return b, nil
}

func loadKey(read func(string) ([]byte, error), name string) (crypto.PrivateKey, error) {
	data, err := read(name)
	if err != nil {
		return nil, err
	}
	k, err := wallet.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}

func loadSigner(read func(string) ([]byte, error), name string) (crypto.Signer, error) {
	k, err := loadKey(read, name)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key cannot sign", name)
	}
	return s, nil
}

func loadEC(read func(string) ([]byte, error), name string) (*ecdsa.PrivateKey, error) {
	k, err := loadKey(read, name)
	if err != nil {
		return nil, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an EC key", name)
	}
	return ec, nil
}

func loadCert(read func(string) ([]byte, error), name string) (*x509.Certificate, error) {
	data, err := read(name)
	if err != nil {
		return nil, err
	}
	certs, err := wallet.ParseCertificatesPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return certs[0], nil
}

func pkcs8PEM(k any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func (ds *DevSet) now() time.Time {
	if ds.Now != nil {
		return ds.Now()
	}
	return time.Now()
}

// WalletAConfig is the walleta.Config a node with this set uses (both
// processing keys, the set's root, the set's clock).
func (ds *DevSet) WalletAConfig() (walleta.Config, error) {
	if ds.A == nil {
		return walleta.Config{}, errors.New("tokenmaker: dev set has no walleta-pay half")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ds.A.RootCert)
	return walleta.Config{
		MerchantID:          ds.A.MerchantID,
		ProcessingKey:       ds.A.ProcessingKeyEC,
		ExtraProcessingKeys: []crypto.PrivateKey{ds.A.ProcessingKeyRSA},
		Roots:               roots,
		Now:                 ds.Now,
	}, nil
}

// WalletBConfig is the walletb.Config a node with this set uses.
func (ds *DevSet) WalletBConfig() (walletb.Config, error) {
	if ds.B == nil {
		return walletb.Config{}, errors.New("tokenmaker: dev set has no walletb-pay half")
	}
	return walletb.Config{
		RecipientID: ds.B.RecipientID,
		PrivateKey:  ds.B.RecipientKey,
		RootKeys:    ds.B.RootKeyList,
		Now:         ds.Now,
	}, nil
}
