package persistence

import (
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

// An approved charge's token reads back as what it grants, from the binary
// record the FSM writes and, for data dirs written before it, from JSON.
func TestTokenRecord(t *testing.T) {
	ts := newTestStore(t)
	create, outcome := chargeCmds("o1", 1e9)
	ts.apply(1, create)
	if r := ts.apply(2, outcome)[0]; r.Err != nil || r.Order == nil || r.Order.Source.PaymentToken != "tok-o1" {
		t.Fatalf("outcome: %+v", r)
	}
	want := &TokenRecord{Merchant: "m_bench", CardID: "c-o1", ExpiresAt: outcome.Order.Outcome.TokenExpiresAt}
	want.Source = create.Order.Create.Source
	want.Source.PaymentToken, want.Source.TokenExpiresAt = "tok-o1", outcome.Order.Outcome.TokenExpiresAt

	ts.reopen() // read from Pebble, not a cache
	got, err := ts.Token("tok-o1")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Token: %v\n got %+v\nwant %+v", err, got, want)
	}
	if got, err := ts.Token("tok-none"); got != nil || err != nil {
		t.Fatalf("unknown token: %+v %v", got, err)
	}

	legacy, err := json.Marshal(want, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.db.Set([]byte(prefixToken+"tok-legacy"), legacy, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.Token("tok-legacy"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("legacy JSON token: %v\n got %+v\nwant %+v", err, got, want)
	}
}
