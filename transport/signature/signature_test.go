package signature

import "testing"

// The contract's test vectors (contract section 2).
func TestContractVectors(t *testing.T) {
	const pk, sk = "api_pk_7b1f3c", "api_sk_2c9e4d"
	cases := []struct{ body, want string }{
		{`{"order_id":"order-1","amount":1020,"currency":"USD"}`, "NzJiYmQ1ZmNlMThlMGY4NGQ4ZjgwMGEzYzIwYzRlOTJjZmNiM2NiMmM0MGY3ZmJhM2EyNGQ2MWNmZWRlNTZkMWExN2VmMWQ4NDk1MGE3ZGE3Njk1OWU1NTc1ZTBjMTliZTQ0MDQ5OTRiMmI3YmE3ZDg2YjE4MjY5ZWY0OGNjNDU="},
		{``, "MGJkYzUxYTFiOGI3YjQzMzI3M2M0MmVjNmJkOWU0ZTg4YzY1YzVkNGM4NDMyNDViMmQzYTJhZjJiY2UwOTYwNGJiMTA5NGVkNmVjYjU5NDY3NzFlOTM5NDcxYWFiMTdmZDE5ZDEyZTlkNzc0NjJlOTY3ZDMyODM2NTA4NGYzYzQ="},
	}
	for _, c := range cases {
		if got := Sign(pk, sk, []byte(c.body)); got != c.want {
			t.Errorf("Sign(%q) = %s, want %s", c.body, got, c.want)
		}
		if !Verify(pk, sk, []byte(c.body), []byte(c.want)) {
			t.Errorf("Verify(%q) refused the contract's vector", c.body)
		}
		key := NewKey(pk, sk)
		for range 3 { // pooled states must be reset between uses
			if got := key.Sign([]byte(c.body)); got != c.want {
				t.Errorf("Key.Sign(%q) = %s, want %s", c.body, got, c.want)
			}
			if !key.Verify([]byte(c.body), []byte(c.want)) || key.Verify([]byte(c.body+" "), []byte(c.want)) {
				t.Errorf("Key.Verify(%q) wrong", c.body)
			}
		}
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	good := Sign("pk", "sk", []byte(`{"a":1}`))
	cases := map[string]struct {
		pk, sk, body, sig string
	}{
		"other body":   {"pk", "sk", `{"a":2}`, good},
		"other secret": {"pk", "sk2", `{"a":1}`, good},
		"other public": {"pk2", "sk", `{"a":1}`, good},
		"truncated":    {"pk", "sk", `{"a":1}`, good[:len(good)-1]},
		"empty":        {"pk", "sk", `{"a":1}`, ""},
	}
	for name, c := range cases {
		if Verify(c.pk, c.sk, []byte(c.body), []byte(c.sig)) {
			t.Errorf("%s: Verify accepted a bad signature", name)
		}
	}
}

func BenchmarkKeyVerify(b *testing.B) {
	body := []byte(`{"order_id":"order-1","amount":1020,"currency":"USD","order_description":"bench order with a typical length"}`)
	sig := []byte(Sign("pk", "sk", body))
	key := NewKey("pk", "sk")
	b.ReportAllocs()
	for b.Loop() {
		if !key.Verify(body, sig) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	body := []byte(`{"order_id":"order-1","amount":1020,"currency":"USD","order_description":"bench order with a typical length"}`)
	sig := []byte(Sign("pk", "sk", body))
	b.ReportAllocs()
	for b.Loop() {
		if !Verify("pk", "sk", body, sig) {
			b.Fatal("refused")
		}
	}
}
