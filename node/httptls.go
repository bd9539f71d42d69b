package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The HTTP listener under TLS (--http-tls-cert-file, --http-tls-key-file):
// TLS 1.2 and later. A renewed certificate is picked up without a restart:
// on SIGHUP, and by a look at the files' modification times at most once a
// second, at a handshake. A pair that does not load (half written, key and
// certificate not matching) is logged and the previous one kept.

// listenHTTP opens the HTTP listener, under TLS when configured.
func (n *Node) listenHTTP() (net.Listener, error) {
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", n.cfg.HTTPAddr, err)
	}
	if n.cfg.HTTPTLSCertFile == "" {
		return ln, nil
	}
	r, err := newCertReloader(n.cfg.HTTPTLSCertFile, n.cfg.HTTPTLSKeyFile, n)
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.httpCert = r
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}), nil
}

// reloadCheckEvery bounds how often a handshake looks at the files.
const reloadCheckEvery = time.Second

// certReloader holds the current certificate of the HTTP listener.
type certReloader struct {
	certFile, keyFile string
	n                 *Node
	mu                sync.Mutex
	cert              *tls.Certificate
	modCert, modKey   time.Time
	checked           time.Time
	hup               chan os.Signal
	done              chan struct{}
}

func newCertReloader(certFile, keyFile string, n *Node) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, n: n, hup: make(chan os.Signal, 1), done: make(chan struct{})}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("--http-tls-cert-file: %w", err)
	}
	signal.Notify(r.hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-r.hup:
				r.mu.Lock()
				err := r.load()
				r.mu.Unlock()
				if err != nil {
					n.logger.Error("SIGHUP: the HTTP certificate did not load; keeping the previous one", "error", err)
				} else {
					n.logger.Info("SIGHUP: HTTP certificate reloaded")
				}
			case <-r.done:
				return
			}
		}
	}()
	return r, nil
}

func (r *certReloader) stop() {
	signal.Stop(r.hup)
	close(r.done)
}

// load reads the pair (the caller holds mu, or none runs yet).
func (r *certReloader) load() error {
	mc, mk := modTime(r.certFile), modTime(r.keyFile)
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cert, r.modCert, r.modKey = &cert, mc, mk
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= reloadCheckEvery {
		r.checked = now
		if !modTime(r.certFile).Equal(r.modCert) || !modTime(r.keyFile).Equal(r.modKey) {
			if err := r.load(); err != nil {
				r.n.logger.Warn("the HTTP certificate files changed but do not load; keeping the previous one", "error", err)
			} else {
				r.n.logger.Info("HTTP certificate reloaded (files changed)")
			}
		}
	}
	return r.cert, nil
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}
