package persistence

import (
	"github.com/paygate/gateway/persistence/command"
	"testing"
)

// A re-wrap entry replaces only the value it was made from, and only
// under the sealed prefixes; the walk finds each card once, with the
// merchant of its order, and resumes where it stopped.
func TestVaultRewrap(t *testing.T) {
	s := newTestStore(t)
	withCard := func(orderID, cardID string) *command.Cmd {
		c := createCmd(orderID, "h-"+orderID)
		c.Order.Create.Source.CardID = cardID
		c.Order.Create.SealedCard = []byte("sealed-" + cardID)
		return c
	}
	// Two orders of one card, one of another.
	s.apply(1, withCard("o1", "card1"), withCard("o2", "card1"), withCard("o3", "card2"))
	cards, next, err := s.CardsToRewrap(nil, 10, func([]byte) bool { return true })
	if err != nil || next != nil {
		t.Fatalf("walk: %v %v", next, err)
	}
	if len(cards) != 2 || cards[0].CardID != "card1" || cards[0].Merchant != "m1" || string(cards[0].Blob) != "sealed-card1" {
		t.Fatalf("walk found %+v", cards)
	}
	c := cards[0]
	stale := NewRewrapEntry(CardKey(c.CardID), []byte("not the stored value"), []byte("X"))
	good := NewRewrapEntry(CardKey(c.CardID), c.Blob, []byte("resealed"))
	outside := NewRewrapEntry([]byte("o/x"), nil, []byte("Y"))
	r := s.apply(2, &command.Cmd{VaultRewrap: &command.VaultRewrap{Entries: []command.RewrapEntry{stale, outside, good}}})[0]
	if r.Rewrapped != 1 {
		t.Fatalf("rewrapped %d, want 1", r.Rewrapped)
	}
	if b, _ := s.Card(c.CardID); string(b) != "resealed" {
		t.Fatalf("card after the re-wrap: %q", b)
	}
	n, err := s.CountSealed(func(b []byte) bool { return string(b) == "resealed" })
	if err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	first, next, err := s.CardsToRewrap(nil, 1, func([]byte) bool { return true })
	if err != nil || len(first) != 1 || next == nil {
		t.Fatalf("a bounded walk: %v %v %v", first, next, err)
	}
}

// A re-sealed merchant record comes back in the result, so the node's
// merchant directory reads it again (a replica replaying the log after the
// previous key was dropped could not open the record as first written).
func TestVaultRewrapReportsMerchants(t *testing.T) {
	s := newTestStore(t)
	m := &command.Merchant{ID: "m1", APIPublicKey: "pk", APISecretSealed: []byte("old")}
	s.apply(1, &command.Cmd{Merchant: m})
	recs, raws, err := s.MerchantValues()
	if err != nil || len(recs) != 1 {
		t.Fatalf("merchants: %v %v", recs, err)
	}
	recs[0].APISecretSealed = []byte("new")
	val, _ := EncodeMerchant(&recs[0])
	r := s.apply(2, &command.Cmd{VaultRewrap: &command.VaultRewrap{Entries: []command.RewrapEntry{NewRewrapEntry(MerchantKey("m1"), raws[0], val)}}})[0]
	if r.Rewrapped != 1 || len(r.Resealed) != 1 || r.Resealed[0].ID != "m1" || string(r.Resealed[0].APISecretSealed) != "new" {
		t.Fatalf("result: %+v", r)
	}
}
