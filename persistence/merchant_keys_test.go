package persistence

import (
	"errors"
	"github.com/paygate/gateway/persistence/command"
	"testing"
)

// A rotation applies against the pair it was made for: the API pair keeps
// the replaced one with the end of its overlap, a rotation that lost a race
// with another is refused and changes nothing, and an unknown merchant is
// a result, not a failure.
func TestMerchantKeyRotation(t *testing.T) {
	s := newTestStore(t)
	s.apply(1, &command.Cmd{Merchant: &command.Merchant{ID: "m1", APIPublicKey: "pk_a", APISecretSealed: []byte("A"),
		WebhookPublicKey: "wh_a", WebhookSecretSealed: []byte("WA")}})
	rot := func(idx uint64, pair, replaces, pk string, until int64) Result {
		return s.apply(idx, &command.Cmd{MerchantKeys: &command.MerchantKeys{MerchantID: "m1", Pair: pair, Replaces: replaces,
			PublicKey: pk, SecretSealed: []byte(pk), PreviousUntil: until}})[0]
	}
	if r := rot(2, "api", "pk_a", "pk_b", 5000); r.Err != nil || r.Merchant == nil || r.Merchant.APIPublicKey != "pk_b" {
		t.Fatalf("api rotation: %+v", r)
	}
	if r := rot(3, "api", "pk_a", "pk_c", 6000); !errors.Is(r.Err, ErrRotationConflict) {
		t.Fatalf("a rotation against a replaced pair: %+v", r)
	}
	if r := rot(4, "webhook", "wh_a", "wh_b", 0); r.Err != nil {
		t.Fatalf("webhook rotation: %+v", r)
	}
	m, err := s.Merchant("m1")
	if err != nil {
		t.Fatal(err)
	}
	if m.APIPublicKey != "pk_b" || string(m.APISecretSealed) != "pk_b" || m.PreviousAPIPublicKey != "pk_a" ||
		string(m.PreviousAPISecretSealed) != "A" || m.PreviousAPIUntil != 5000 || m.WebhookPublicKey != "wh_b" {
		t.Fatalf("stored after the rotations: %+v", m)
	}
	r := s.apply(5, &command.Cmd{MerchantKeys: &command.MerchantKeys{MerchantID: "nobody", Pair: "api"}})[0]
	if !errors.Is(r.Err, ErrUnknownMerchant) {
		t.Fatalf("unknown merchant: %+v", r)
	}
}
