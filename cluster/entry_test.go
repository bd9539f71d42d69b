package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
)

// entrySamples has one command of each persistence.Cmd kind, keyed by the
// Cmd field it sets.
func entrySamples() map[string]persistence.Cmd {
	three := &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "cavv"}
	return map[string]persistence.Cmd{
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
		"Merchant": {Merchant: &persistence.Merchant{ID: "m1", Name: "Shop", APIPublicKey: "pk",
			APISecretSealed: []byte("sealed"), WebhookPublicKey: "wpk", WebhookSecretSealed: []byte("wsealed"),
			RateLimitRPS: 50, CreatedAt: 7, PreviousAPIPublicKey: "pk0", PreviousAPISecretSealed: []byte("s0"),
			PreviousAPIUntil: 8}}, // JSON: nil []byte would come back empty
		"MerchantKeys": {MerchantKeys: &persistence.MerchantKeys{MerchantID: "m1", Pair: "api", Replaces: "pk",
			PublicKey: "pk2", SecretSealed: []byte("sealed2"), PreviousUntil: 9}},
		"VaultRewrap": {VaultRewrap: &persistence.VaultRewrap{Entries: []persistence.RewrapEntry{
			{Key: []byte("c/card1"), OldSum: []byte("sum"), Value: []byte("blob")}}}},
		"Notify": {Notify: &persistence.NotifyUpdate{ID: "ntf_1", Time: 3,
			Attempt: &persistence.AttemptRecord{At: 3, HTTPCode: 500, DurationNs: 10}, NextDueAt: 4}},
		"Member": {Member: &persistence.Member{NodeID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8081"}},
		"NotifyPrune": {NotifyPrune: &persistence.NotifyPrune{Before: 11,
			Entries: []persistence.NotifyExpiry{{ID: "ntf_1", FinishedAt: 5}, {ID: "ntf_2", FinishedAt: 6}}}},
		"IdemPrune": {IdemPrune: &persistence.IdemPrune{Before: 12,
			Entries: []persistence.IdemExpiry{{Merchant: "m1", Key: "ik", CreatedAt: 7}}}},
	}
}

// Every Cmd kind round-trips through EncodeEntry and DecodeEntry, alone
// and packed together, and so do a Cmd with no field or several set (carried
// as JSON, answered by Batch.Apply as before).
func TestEntryRoundTrip(t *testing.T) {
	samples := entrySamples()
	var all []persistence.Cmd
	for f := range reflect.TypeFor[persistence.Cmd]().Fields() {
		c, ok := samples[f.Name]
		if !ok {
			t.Fatalf("persistence.Cmd.%s has no sample: add one, and check EncodeEntry carries it", f.Name)
		}
		if reflect.ValueOf(c).FieldByName(f.Name).IsNil() {
			t.Fatalf("sample %s does not set its field", f.Name)
		}
		entryRoundTrip(t, f.Name, []persistence.Cmd{c})
		all = append(all, c)
	}
	entryRoundTrip(t, "all kinds", append(all, all...))
	entryRoundTrip(t, "empty entry", []persistence.Cmd{})
	entryRoundTrip(t, "empty command", []persistence.Cmd{{}})
	two := persistence.Cmd{Order: samples["Order"].Order, Member: samples["Member"].Member}
	entryRoundTrip(t, "two fields", []persistence.Cmd{two})

	// format, count 1, tag
	if data, _ := EncodeEntry([]persistence.Cmd{samples["Order"]}); data[0] != entryFormatV1 || data[2] != entryOrder {
		t.Fatalf("a lone order command is not binary: %x", data)
	}
	if data, _ := EncodeEntry([]persistence.Cmd{two}); data[2] != entryJSON {
		t.Fatalf("a Cmd with two fields is not JSON: %x", data)
	}
}

func entryRoundTrip(t *testing.T, name string, cmds []persistence.Cmd) {
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
	cmds := []persistence.Cmd{samples["Order"], samples["Merchant"], samples["Notify"], samples["Member"], {}}
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
	want := []persistence.Cmd{
		{Order: &order.Command{Kind: order.KindSettle, Time: 1_700_000_000_000_000_000, Merchant: "m1", OrderID: "o1",
			TxnID: "t2", Amount: 600, IdempotencyKey: "ik1", RequestHash: "h2"}},
		{Member: &persistence.Member{NodeID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8082"}},
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

// A log that holds both formats applies: a legacy JSON entry, then binary
// ones, through the FSM as raft calls it.
func TestFSMAppliesBothEntryFormats(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(filepath.Join(t.TempDir(), "state"), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fsm, err := NewFSM(store, logger)
	if err != nil {
		t.Fatal(err)
	}
	create := entrySamples()["Order"]
	create.Order = &order.Command{Kind: create.Order.Kind, Time: 1, Merchant: "m1", OrderID: "o1", TxnID: "t1",
		RequestHash: "h1", Create: create.Order.Create}
	legacy, err := json.Marshal([]persistence.Cmd{create})
	if err != nil {
		t.Fatal(err)
	}
	outcome, err := EncodeEntry([]persistence.Cmd{{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2,
		Merchant: "m1", OrderID: "o1", TxnID: "t1", Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	settle, err := EncodeEntry([]persistence.Cmd{{Order: &order.Command{Kind: order.KindSettle, Time: 3,
		Merchant: "m1", OrderID: "o1", TxnID: "t2", Amount: 400}}})
	if err != nil {
		t.Fatal(err)
	}
	out := fsm.ApplyBatch([]*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: legacy},
		{Index: 2, Type: raft.LogCommand, Data: outcome},
		{Index: 3, Type: raft.LogCommand, Data: settle},
	})
	for i, r := range out {
		res := r.([]persistence.Result)
		if len(res) != 1 || res[0].Err != nil || res[0].Outcome.Reject != nil {
			t.Fatalf("entry %d: %+v", i+1, res)
		}
	}
	o, err := store.GetOrder("m1", "o1")
	if err != nil || o == nil || o.Status != order.StatusSettled || o.SettledAmount != 400 || len(o.Txns) != 2 {
		t.Fatalf("order after both formats: %+v %v", o, err)
	}
	if fsm.AppliedIndex() != 3 {
		t.Fatalf("applied index %d", fsm.AppliedIndex())
	}
}

// BenchmarkEntryCodec compares the entry codec with the JSON entries it
// replaced, for a packed entry of 16 charge creates.
func BenchmarkEntryCodec(b *testing.B) {
	cmds := make([]persistence.Cmd, 16)
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

// A command that cannot be encoded (a JSON command with a string that is
// not UTF-8, such as an idempotency key stored before the API refused them)
// fails alone: the proposals packed with it go on, in their order.
func TestUnencodableCommandFailsAlone(t *testing.T) {
	bad := persistence.Cmd{IdemPrune: &persistence.IdemPrune{Before: 10,
		Entries: []persistence.IdemExpiry{{Merchant: "m1", Key: "refund-\xff\xfe", CreatedAt: 1}}}}
	if _, err := EncodeEntry([]persistence.Cmd{acceptance("o1"), bad}); err == nil {
		t.Fatal("an entry with a key that is not UTF-8 should not encode")
	}
	var batch []*proposal
	var cmds []persistence.Cmd
	for _, c := range []persistence.Cmd{acceptance("o1"), bad, acceptance("o2"), approval("o1")} {
		batch = append(batch, newProposal(context.Background(), c))
		cmds = append(cmds, c)
	}
	failing := batch[1]
	kept, keptCmds := dropUnencodable(batch, cmds)
	if len(kept) != 3 || kept[0].cmd.Order.OrderID != "o1" || kept[1].cmd.Order.OrderID != "o2" ||
		kept[2].cmd.Order.Kind != order.KindAuthOutcome || len(keptCmds) != 3 || keptCmds[1].Order.OrderID != "o2" {
		t.Fatalf("kept %d proposals: %+v", len(kept), keptCmds)
	}
	select {
	case <-failing.done:
		if failing.ans.err == nil {
			t.Fatal("the unencodable proposal was answered without an error")
		}
	default:
		t.Fatal("the unencodable proposal was not answered")
	}
	for _, p := range kept {
		if len(p.done) != 0 {
			t.Fatal("a proposal that goes on was answered")
		}
	}
	if _, err := EncodeEntry(keptCmds); err != nil {
		t.Fatalf("the rest should encode: %v", err)
	}
}
