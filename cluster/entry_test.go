package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// A log that holds both formats applies: a legacy JSON entry, then binary
// ones, through the FSM as raft calls it.
func TestFSMAppliesBothEntryFormats(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(filepath.Join(t.TempDir(), "state"), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fsm, err := NewFSM(StoreState(store), logger)
	if err != nil {
		t.Fatal(err)
	}
	create := acceptance("o1")
	create.Order.TxnID, create.Order.RequestHash, create.Order.Create.Amount = "t1", "h1", 1000
	legacy, err := json.Marshal([]command.Cmd{create})
	if err != nil {
		t.Fatal(err)
	}
	outcome, err := command.EncodeEntry([]command.Cmd{{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2,
		Merchant: "m1", OrderID: "o1", TxnID: "t1", Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	settle, err := command.EncodeEntry([]command.Cmd{{Order: &order.Command{Kind: order.KindSettle, Time: 3,
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

// A command that cannot be encoded (a JSON command with a string that is
// not UTF-8, such as an idempotency key stored before the API refused them)
// fails alone: the proposals packed with it go on, in their order.
func TestUnencodableCommandFailsAlone(t *testing.T) {
	bad := command.Cmd{IdemPrune: &command.IdemPrune{Before: 10,
		Entries: []command.IdemExpiry{{Merchant: "m1", Key: "refund-\xff\xfe", CreatedAt: 1}}}}
	if _, err := command.EncodeEntry([]command.Cmd{acceptance("o1"), bad}); err == nil {
		t.Fatal("an entry with a key that is not UTF-8 should not encode")
	}
	var batch []*proposal
	var cmds []command.Cmd
	for _, c := range []command.Cmd{acceptance("o1"), bad, acceptance("o2"), approval("o1")} {
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
	if _, err := command.EncodeEntry(keptCmds); err != nil {
		t.Fatalf("the rest should encode: %v", err)
	}
}
