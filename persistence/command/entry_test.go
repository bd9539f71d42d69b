package command

import (
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
)

// entrySamples has one command of each Cmd kind, keyed by the
// Cmd field it sets.
func entrySamples() map[string]Cmd {
	three := &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "cavv"}
	return map[string]Cmd{
		"Order": {Order: &order.Command{
			Kind: order.KindCreate, Time: 1_700_000_000_000_000_000, Merchant: "m1", OrderID: "o1", TxnID: "t1",
			RequestHash: "h1", IdempotencyKey: "ik",
			Create: &order.CreateData{Amount: 1000, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24,
				Source: order.PaymentSource{Type: "card", CardID: "card1", Masked: "411111******1111",
					Billing: &order.Address{City: "Springfield", Country: "US"}},
				SealedCard: []byte{1, 2, 3}, ThreeDS: three},
			Outcome:       &order.OutcomeData{Approved: true, AuthCode: "A1"},
			Form:          &order.FormData{TokenHash: "th", ExpiresAt: 5},
			Submit:        &order.SubmitData{Source: order.PaymentSource{Type: "card"}},
			Challenge:     &order.ChallengeData{ID: "c1", RedirectURL: "https://x/3ds/c1", ExpiresAt: 9},
			ThreeDSResult: &order.ThreeDSResultData{ChallengeID: "c1", Authenticated: true, Result: three},
		}},
		"Merchant": {Merchant: &Merchant{ID: "m1", Name: "Shop", APIPublicKey: "pk",
			APISecretSealed: []byte("sealed"), WebhookPublicKey: "wpk", WebhookSecretSealed: []byte("wsealed"),
			RateLimitRPS: 50, CreatedAt: 7}}, // JSON: nil []byte would come back empty
		"MerchantKeys": {MerchantKeys: &MerchantKeys{MerchantID: "m1", Pair: "api", Replaces: "pk",
			PublicKey: "pk2", SecretSealed: []byte("sealed2"), PreviousUntil: 9}},
		"VaultRewrap": {VaultRewrap: &VaultRewrap{Entries: []RewrapEntry{
			{Key: []byte("c/card1"), OldSum: []byte("sum"), Value: []byte("blob")}}}},
		"Notify": {Notify: &NotifyUpdate{ID: "ntf_1", Time: 3,
			Attempt: &AttemptRecord{At: 3, HTTPCode: 500, DurationNs: 10}, NextDueAt: 4}},
		"Member": {Member: &Member{NodeID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8081"}},
		"NotifyPrune": {NotifyPrune: &NotifyPrune{Before: 11,
			Entries: []NotifyExpiry{{ID: "ntf_1", FinishedAt: 5}, {ID: "ntf_2", FinishedAt: 6}}}},
		"IdemPrune": {IdemPrune: &IdemPrune{Before: 12,
			Entries: []IdemExpiry{{Merchant: "m1", Key: "ik", CreatedAt: 7}}}},
		"Audit": {Audit: &AuditRecord{Seq: 1, At: "2026-11-28T00:00:00Z", Actor: "admin-token",
			Action: "POST /admin/v1/merchants", Target: "merchant:m1", SourceIP: "127.0.0.1", Result: "200",
			PrevHash: AuditGenesis, Hash: "h"}},
		"ClusterCA": {ClusterCA: &ClusterCA{CertPEM: "-----BEGIN CERTIFICATE-----", SealedKey: []byte("sealed")}},
		"MID": {MID: &MID{MID: "MID0001", MerchantID: "m1", AcquirerAddr: "10.0.0.5:8583",
			Currencies: []string{"EUR", "USD"}, RegisteredAt: 15}},
		"JoinToken":      {JoinToken: &JoinToken{ID: "0123456789abcdef", SecretHash: "ab12", CreatedAt: 13, ExpiresAt: 14}},
		"RequestHashKey": {RequestHashKey: &RequestHashKey{SealedKey: []byte("sealed-hash-key")}},
		"Operator": {Operator: &Operator{Email: "ops@example.com", Role: "support",
			PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
			CreatedAt:    15, DisabledAt: 16, Disable: true}},
		"Session": {Session: &Session{TokenHash: "ab12", Email: "ops@example.com", CreatedAt: 17, ExpiresAt: 18, End: true}},
	}
}

// Every Cmd kind round-trips through EncodeEntry and DecodeEntry, alone
// and packed together, and so do a Cmd with no field or several set (carried
// as JSON, answered by Batch.Apply as before).
func TestEntryRoundTrip(t *testing.T) {
	samples := entrySamples()
	var all []Cmd
	for f := range reflect.TypeFor[Cmd]().Fields() {
		c, ok := samples[f.Name]
		if !ok {
			t.Fatalf("Cmd.%s has no sample: add one, and check EncodeEntry carries it", f.Name)
		}
		if reflect.ValueOf(c).FieldByName(f.Name).IsNil() {
			t.Fatalf("sample %s does not set its field", f.Name)
		}
		entryRoundTrip(t, f.Name, []Cmd{c})
		all = append(all, c)
	}
	entryRoundTrip(t, "all kinds", append(all, all...))
	entryRoundTrip(t, "empty entry", []Cmd{})
	entryRoundTrip(t, "empty command", []Cmd{{}})
	two := Cmd{Order: samples["Order"].Order, Member: samples["Member"].Member}
	entryRoundTrip(t, "two fields", []Cmd{two})

	// format, count 1, tag
	if data, _ := EncodeEntry([]Cmd{samples["Order"]}); data[0] != entryFormatV1 || data[2] != entryOrder {
		t.Fatalf("a lone order command is not binary: %x", data)
	}
	if data, _ := EncodeEntry([]Cmd{two}); data[2] != entryJSON {
		t.Fatalf("a Cmd with two fields is not JSON: %x", data)
	}
}

func entryRoundTrip(t *testing.T, name string, cmds []Cmd) {
	t.Helper()
	data, err := EncodeEntry(cmds)
	if err != nil {
		t.Fatalf("%s: encode: %v", name, err)
	}
	if data[0] == '[' {
		t.Fatalf("%s: encoded as legacy JSON", name)
	}
	got, err := DecodeEntry(data)
	if err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	if !reflect.DeepEqual(got, cmds) {
		t.Fatalf("%s: round trip differs:\nwant %+v\ngot  %+v", name, cmds, got)
	}
	// Corrupt entries are errors, never panics.
	for n := range len(data) {
		if _, err := DecodeEntry(data[:n]); err == nil {
			t.Fatalf("%s: truncated to %d of %d bytes: no error", name, n, len(data))
		}
	}
	if _, err := DecodeEntry(append(append([]byte(nil), data...), 0)); err == nil {
		t.Fatalf("%s: trailing byte: no error", name)
	}
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0xa5
		_, _ = DecodeEntry(bad)
	}
}

// Entries written before the binary format (a JSON array of Cmd, what
// EncodeEntry returned then) still decode: an existing data dir's log
// replays.
func TestEntryLegacyJSON(t *testing.T) {
	samples := entrySamples()
	cmds := []Cmd{samples["Order"], samples["Merchant"], samples["Notify"], samples["Member"], {}}
	old, err := json.Marshal(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeEntry(old); err != nil || !reflect.DeepEqual(got, cmds) {
		t.Fatalf("legacy entry: %v\nwant %+v\ngot  %+v", err, cmds, got)
	}
	// The bytes as an older node wrote them, not only as this json package
	// writes them today.
	literal := `[{"o":{"k":"settle","t":1700000000000000000,"m":"m1","o":"o1","x":"t2","a":600,"ik":"ik1","h":"h2"}},` +
		`{"mb":{"node_id":"n2","raft_addr":"127.0.0.1:7002","http_addr":"127.0.0.1:8082"}}]`
	want := []Cmd{
		{Order: &order.Command{Kind: order.KindSettle, Time: 1_700_000_000_000_000_000, Merchant: "m1", OrderID: "o1",
			TxnID: "t2", Amount: 600, IdempotencyKey: "ik1", RequestHash: "h2"}},
		{Member: &Member{NodeID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8082"}},
	}
	if got, err := DecodeEntry([]byte(literal)); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("legacy literal: %v\nwant %+v\ngot  %+v", err, want, got)
	}
	for _, bad := range []string{"", "{}", "[", "\x02", "\x01"} {
		if _, err := DecodeEntry([]byte(bad)); err == nil {
			t.Fatalf("%q decoded", bad)
		}
	}
}

// BenchmarkEntryCodec compares the entry codec with the JSON entries it
// replaced, for a packed entry of 16 charge creates.
func BenchmarkEntryCodec(b *testing.B) {
	cmds := make([]Cmd, 16)
	for i := range cmds {
		cmds[i] = entrySamples()["Order"]
		cmds[i].Order.Outcome, cmds[i].Order.Form, cmds[i].Order.Submit = nil, nil, nil
		cmds[i].Order.Challenge, cmds[i].Order.ThreeDSResult = nil, nil
	}
	bin, err := EncodeEntry(cmds)
	if err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(cmds)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("entry of %d creates: binary %d bytes, JSON %d bytes", len(cmds), len(bin), len(js))
	b.Run("encode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeEntry(cmds); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(cmds); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeEntry(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeEntry(js); err != nil {
				b.Fatal(err)
			}
		}
	})
}
