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
