package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygate/gateway/cluster/pki"
)

func TestCertsCreateCAAndNode(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := certsCmd([]string{"create-ca", "--dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("create-ca: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "CA fingerprint sha256:") {
		t.Fatalf("create-ca printed %q", out.String())
	}
	if code := certsCmd([]string{"create-ca", "--dir", dir}, &out, &errOut); code != 1 {
		t.Fatal("a second create-ca replaced the CA")
	}
	if code := certsCmd([]string{"create-node", "--dir", dir, "--node-id", "node2", "--addr", "10.0.0.2:7000,gw-2.internal"}, &out, &errOut); code != 0 {
		t.Fatalf("create-node: %d %s", code, errOut.String())
	}
	for name, mode := range map[string]os.FileMode{pki.CAKeyFile: 0o600, "node2.key": 0o600, pki.CACertFile: 0o644, "node2.crt": 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %o", name, st.Mode(), err, mode)
		}
	}
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), "")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "node2.crt"))
	cert, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "gw-2.internal", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "node2" || cert.VerifyHostname("10.0.0.2") != nil {
		t.Fatalf("names: %s %v", cert.Subject.CommonName, cert.IPAddresses)
	}
	for _, args := range [][]string{{"create-node", "--dir", dir, "--node-id", "node3"}, {"create-node", "--dir", dir, "--node-id", "../x", "--addr", "h"}, {"create-ca"}, {"nope"}} {
		if code := certsCmd(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
