package link

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/internal/syncbuf"
	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// tlsFiles are a CA and certificates it signed, as files (what gatewayctl
// certs create-ca and create-node write).
type tlsFiles struct {
	dir, ca string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.CreateCAFiles(dir, "acquirer link CA"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acquirer", "node1"} {
		if _, err := pki.CreateNodeFiles(dir, name, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}
	return tlsFiles{dir: dir, ca: filepath.Join(dir, pki.CACertFile)}
}

func (f tlsFiles) cert(name string) (string, string) {
	return filepath.Join(f.dir, name+".crt"), filepath.Join(f.dir, name+".key")
}

// startTLSHost serves a host on a loopback port behind TLS with mutual
// authentication against files' CA.
func startTLSHost(t *testing.T, files tlsFiles) (addr string, logs *syncbuf.Buffer) {
	t.Helper()
	logs = &syncbuf.Buffer{}
	h, err := host.Open(host.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	certFile, keyFile := files.cert("acquirer")
	srv, err := host.ServerTLS(certFile, keyFile, files.ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.Serve(tls.NewListener(ln, srv))
	return ln.Addr().String(), logs
}

// The link over mutual TLS: a node with the CA and its certificate is
// served; a plaintext client, a TLS client without a certificate, and a
// client that trusts another CA are not, and the host logs the refusal.
func TestLinkOverTLS(t *testing.T) {
	files := newTLSFiles(t)
	addr, logs := startTLSHost(t, files)

	t.Run("mutual TLS", func(t *testing.T) {
		certFile, keyFile := files.cert("node1")
		cfg, err := ClientTLS(files.ca, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c := Dial(Config{Addr: addr, TLS: cfg, Timeout: 5 * time.Second})
		defer c.Close()
		r, err := NewAcquirer(c).Authorize(context.Background(), req("tls-ok", "4111111111111111"))
		if err != nil {
			t.Fatal(err)
		}
		checkApproved(t, "tls-ok", r, "M")
	})

	t.Run("plaintext client", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		echo := iso8583.New("0800").Set(iso8583.FieldNetworkManagement, "301").Set(iso8583.FieldSTAN, "000001").
			Set(iso8583.FieldTransmissionTime, iso8583.TransmissionTime(time.Now().UTC()))
		if err := iso8583.NewFrameWriter(conn).Send(echo); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := iso8583.NewFrameReader(conn).Next(func(error) {})
		if err == nil {
			t.Fatalf("a plaintext echo was answered: %s", m.Dump())
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the host kept a plaintext connection open instead of closing it")
		}
	})

	refused := func(t *testing.T, cfg *tls.Config) {
		t.Helper()
		c := Dial(Config{Addr: addr, TLS: cfg, Timeout: time.Second})
		defer c.Close()
		r, err := NewAcquirer(c).Authorize(context.Background(), req("tls-refused", "4111111111111111"))
		if err == nil {
			t.Fatalf("authorised over a link the host should have refused: %+v", r)
		}
	}
	t.Run("no client certificate", func(t *testing.T) {
		cfg, err := ClientTLS(files.ca, "", "")
		if err != nil {
			t.Fatal(err)
		}
		refused(t, cfg)
	})
	t.Run("another CA", func(t *testing.T) {
		other := newTLSFiles(t)
		certFile, keyFile := other.cert("node1")
		cfg, err := ClientTLS(other.ca, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, cfg)
	})
	if !strings.Contains(logs.String(), "TLS handshake refused") {
		t.Errorf("the host did not log a refused handshake:\n%s", logs.String())
	}
}

// ClientTLS refuses what cannot make a verified link.
func TestClientTLSRefusesIncompleteFiles(t *testing.T) {
	files := newTLSFiles(t)
	certFile, keyFile := files.cert("node1")
	for name, args := range map[string][3]string{
		"no CA":            {"", certFile, keyFile},
		"cert without key": {files.ca, certFile, ""},
		"CA not a CA":      {certFile, "", ""},
		"missing CA file":  {filepath.Join(files.dir, "nope.crt"), "", ""},
	} {
		if _, err := ClientTLS(args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
