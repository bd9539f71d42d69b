package persistence

import (
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// The cluster CA is recorded once: a second, other CA is refused the same
// way on every replica, and the same one again is a no-op. Join tokens are
// kept by id with their hash only.
func TestClusterCAAndJoinTokens(t *testing.T) {
	ts := newTestStore(t)
	ca := &command.ClusterCA{CertPEM: "cert-1", SealedKey: []byte{1, 2, 3}}
	if res := ts.apply(1, &command.Cmd{ClusterCA: ca}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	res := ts.apply(2, &command.Cmd{ClusterCA: ca}, &command.Cmd{ClusterCA: &command.ClusterCA{CertPEM: "cert-2", SealedKey: []byte{9}}})
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("the same CA again: %v; another CA: %v (want refused)", res[0].Err, res[1].Err)
	}
	// Within one batch, the first CA wins as well.
	fresh := newTestStore(t)
	res = fresh.apply(1, &command.Cmd{ClusterCA: &command.ClusterCA{CertPEM: "a"}}, &command.Cmd{ClusterCA: &command.ClusterCA{CertPEM: "b"}})
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("two CAs in one batch: %v, %v", res[0].Err, res[1].Err)
	}
	got, err := ts.ClusterCA()
	if err != nil || got == nil || got.CertPEM != "cert-1" {
		t.Fatalf("ClusterCA() = %+v, %v", got, err)
	}

	tok := &command.JoinToken{ID: "0123456789abcdef", SecretHash: "hash", CreatedAt: 1, ExpiresAt: 2}
	if res := ts.apply(3, &command.Cmd{JoinToken: tok}, &command.Cmd{JoinToken: &command.JoinToken{ID: "x"}}); res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("token: %v; token without a hash: %v (want refused)", res[0].Err, res[1].Err)
	}
	if got, err := ts.JoinToken(tok.ID); err != nil || got == nil || *got != *tok {
		t.Fatalf("JoinToken() = %+v, %v", got, err)
	}
	if got, err := ts.JoinToken("nope"); err != nil || got != nil {
		t.Fatalf("unknown token: %+v, %v", got, err)
	}
}

// The request-hash key is recorded once: a later one changes nothing (the
// stored hashes were made with the first); a vault re-wrap may re-seal it
// and CountSealed counts it.
func TestRequestHashKeyRecord(t *testing.T) {
	ts := newTestStore(t)
	if got, err := ts.RequestHashKey(); err != nil || got != nil {
		t.Fatalf("before any: %+v, %v", got, err)
	}
	res := ts.apply(1, &command.Cmd{RequestHashKey: &command.RequestHashKey{SealedKey: []byte("first")}},
		&command.Cmd{RequestHashKey: &command.RequestHashKey{SealedKey: []byte("second")}},
		&command.Cmd{RequestHashKey: &command.RequestHashKey{}})
	if res[0].Err != nil || res[1].Err != nil || res[2].Err == nil {
		t.Fatalf("first %v, second %v, empty %v (want refused)", res[0].Err, res[1].Err, res[2].Err)
	}
	got, err := ts.RequestHashKey()
	if err != nil || got == nil || string(got.SealedKey) != "first" {
		t.Fatalf("RequestHashKey() = %+v, %v", got, err)
	}
	if n, err := ts.CountSealed(func(b []byte) bool { return string(b) == "first" }); err != nil || n != 1 {
		t.Fatalf("CountSealed = %d, %v", n, err)
	}
	old, err := EncodeRequestHashKey(got)
	if err != nil {
		t.Fatal(err)
	}
	val, _ := EncodeRequestHashKey(&command.RequestHashKey{SealedKey: []byte("resealed")})
	r := ts.apply(2, &command.Cmd{VaultRewrap: &command.VaultRewrap{Entries: []command.RewrapEntry{NewRewrapEntry(RequestHashKeyKey(), old, val)}}})[0]
	if r.Rewrapped != 1 {
		t.Fatalf("rewrapped %d, want 1", r.Rewrapped)
	}
	if got, _ := ts.RequestHashKey(); got == nil || string(got.SealedKey) != "resealed" {
		t.Fatalf("after the re-wrap: %+v", got)
	}
}
