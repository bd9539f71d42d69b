package link

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/paygate/gateway/cluster/pki"
)

// ClientTLS is the link's TLS (docs/acquirer.md, "Securing the link"): the
// acquirer host's certificate must chain to a CA in caFile and name the
// host the link dials; certFile and keyFile, when given, are the node's
// client certificate for a host that asks for one (mutual TLS). TLS 1.2 is
// the floor: acquirer hosts commonly stop there.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, errors.New("the acquirer link's TLS needs the CA file its host's certificate chains to")
	}
	ca, err := pki.LoadCA(caFile, "")
	if err != nil {
		return nil, fmt.Errorf("acquirer CA: %w", err)
	}
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("the acquirer link's client certificate and key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("acquirer link client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
