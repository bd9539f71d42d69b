package wallet

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrKey is wrapped by the PEM loading errors.
var ErrKey = errors.New("wallet: cannot read key")

// ParsePrivateKeyPEM returns the first private key in PEM data: PKCS#8
// ("PRIVATE KEY"), SEC1 ("EC PRIVATE KEY") or PKCS#1 ("RSA PRIVATE KEY").
// EC keys come back as *ecdsa.PrivateKey, RSA keys as *rsa.PrivateKey. Other
// blocks (certificates, "EC PARAMETERS") are skipped; encrypted keys are
// refused. Errors never quote the key.
func ParsePrivateKeyPEM(data []byte) (crypto.PrivateKey, error) {
	keys, err := parsePrivateKeys(data, 1)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// ParsePrivateKeysPEM returns every private key in PEM data, in order (see
// ParsePrivateKeyPEM). A walleta-pay processing key file may hold both the
// EC key (EC_v1) and the RSA key (RSA_v1) of a merchant.
func ParsePrivateKeysPEM(data []byte) ([]crypto.PrivateKey, error) {
	return parsePrivateKeys(data, 0)
}

func parsePrivateKeys(data []byte, limit int) ([]crypto.PrivateKey, error) {
	var keys []crypto.PrivateKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var (
			key crypto.PrivateKey
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			err = errors.New("encrypted keys are not supported")
		default:
			continue
		}
		if err == nil && block.Headers["Proc-Type"] != "" {
			err = errors.New("encrypted keys are not supported")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: PEM block %d (%s): %v", ErrKey, n, block.Type, err)
		}
		keys = append(keys, key)
		if limit > 0 && len(keys) == limit {
			break
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no PEM private key found", ErrKey)
	}
	return keys, nil
}

// ParseCertPoolPEM returns a pool of every certificate in PEM data (the
// walleta-pay root). It fails when there is none.
func ParseCertPoolPEM(data []byte) (*x509.CertPool, error) {
	certs, err := ParseCertificatesPEM(data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// ParseCertificatesPEM returns every "CERTIFICATE" block of PEM data.
func ParseCertificatesPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrKey, len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: no PEM certificate found", ErrKey)
	}
	return certs, nil
}
