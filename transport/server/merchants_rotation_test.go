package server

import (
	"testing"
	"time"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/signature"
)

// The directory finds a merchant by its current API key and by a replaced
// one; the replaced one signs until the end of its overlap, to the
// nanosecond, and a key two rotations old finds nothing.
func TestDirectoryHonoursTheOverlap(t *testing.T) {
	v, err := vault.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	seal := func(s string) []byte {
		b, err := v.Seal([]byte(s), vault.AAD("merchant-api", "m1"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hook, _ := v.Seal([]byte("whsk"), vault.AAD("merchant-webhook", "m1"))
	dir := NewMerchants(v)
	until := time.Unix(1_800_000_000, 0)
	rec := &command.Merchant{ID: "m1", APIPublicKey: "pk_b", APISecretSealed: seal("sk_b"),
		WebhookPublicKey: "whpk", WebhookSecretSealed: hook,
		PreviousAPIPublicKey: "pk_a", PreviousAPISecretSealed: seal("sk_a"), PreviousAPIUntil: until.UnixNano()}
	if err := dir.Put(rec); err != nil {
		t.Fatal(err)
	}
	cur, prev := dir.ByPublicKey("pk_b"), dir.ByPublicKey("pk_a")
	if cur == nil || prev == nil || prev.ID != "m1" || prev.APISecret != cur.APISecret {
		t.Fatalf("lookups: %v %v", cur, prev)
	}
	if !prev.apiKey.Verify([]byte("x"), []byte(signature.Sign("pk_a", "sk_a", []byte("x")))) {
		t.Fatal("the replaced entry does not verify with the replaced secret")
	}
	for _, c := range []struct {
		at        time.Time
		cur, prev bool
	}{
		{until.Add(-time.Nanosecond), true, true},
		{until, true, false},
		{until.Add(time.Hour), true, false},
	} {
		if cur.apiKeyValid(c.at) != c.cur || prev.apiKeyValid(c.at) != c.prev {
			t.Fatalf("at until%+v: current %v replaced %v, want %v %v", c.at.Sub(until), cur.apiKeyValid(c.at), prev.apiKeyValid(c.at), c.cur, c.prev)
		}
	}
	// The next rotation: pk_a is gone, pk_b is the replaced one.
	rec2 := *rec
	rec2.APIPublicKey, rec2.APISecretSealed = "pk_c", seal("sk_c")
	rec2.PreviousAPIPublicKey, rec2.PreviousAPISecretSealed = "pk_b", seal("sk_b")
	if err := dir.Put(&rec2); err != nil {
		t.Fatal(err)
	}
	if dir.ByPublicKey("pk_a") != nil || dir.ByPublicKey("pk_b") == nil || dir.ByPublicKey("pk_c") == nil {
		t.Fatal("after a second rotation the first key must find nothing")
	}
	if dir.ByPublicKey("pk_c").limiter != cur.limiter {
		t.Fatal("a rotation reset the merchant's rate limiter")
	}
}
