package pki

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTrip(t *testing.T) {
	tok := NewToken(strings.Repeat("a1", 32))
	got, err := ParseToken(tok.String())
	if err != nil || got != tok {
		t.Fatalf("ParseToken(%q) = %+v, %v", tok, got, err)
	}
	if !SecretMatches(tok.Secret, tok.SecretHash()) || SecretMatches(strings.Repeat("0", 32), tok.SecretHash()) {
		t.Fatal("SecretMatches")
	}
	if strings.Contains(tok.SecretHash(), tok.Secret) {
		t.Fatal("the hash shows the secret")
	}
	for _, bad := range []string{"", "v1", "v2." + tok.ID + "." + tok.Secret + "." + tok.CAFingerprint,
		"v1." + tok.ID + "." + tok.Secret, "v1." + tok.ID + "." + strings.ToUpper(tok.Secret) + "." + tok.CAFingerprint,
		"v1." + tok.ID + ".zz" + tok.Secret[2:] + "." + tok.CAFingerprint} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
}

func TestIssueFromCSR(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, "ignored")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueCSR(csr, "node2", []string{"10.0.0.2", "node2.internal"})
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "node2" || cert.VerifyHostname("10.0.0.2") != nil || cert.VerifyHostname("node2.internal") != nil {
		t.Fatalf("names: %s %v %v", cert.Subject.CommonName, cert.IPAddresses, cert.DNSNames)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&CA{Cert: ca.Cert}).IssueCSR(csr, "node2", nil); err == nil {
		t.Fatal("a CA without its key issued a certificate")
	}
	if _, err := ca.IssueCSR([]byte("junk"), "node2", nil); err == nil {
		t.Fatal("junk was taken for a certificate request")
	}
}

func TestNeedsRenewal(t *testing.T) {
	now := time.Now()
	year := &x509.Certificate{NotBefore: now.Add(-300 * 24 * time.Hour), NotAfter: now.Add(65 * 24 * time.Hour)}
	if NeedsRenewal(year, now) {
		t.Error("65 days left of a year: renewed already")
	}
	if !NeedsRenewal(year, now.Add(10*24*time.Hour)) {
		t.Error("55 days left of a year: not renewed")
	}
	short := &x509.Certificate{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(50 * time.Minute)}
	if !NeedsRenewal(short, now) {
		t.Error("a third of a short certificate left: not renewed")
	}
}
