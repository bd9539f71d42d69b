package persistence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// The FSM appends only a record that extends the chain; a second record
// decided from the same head (two proposals at once) is refused and
// changes nothing.
func TestAuditChainAppendsOnlyTheNextRecord(t *testing.T) {
	ts := newTestStore(t)
	head, _ := ts.AuditHead()
	if head.Seq != 0 || head.Hash != AuditGenesis {
		t.Fatalf("empty log's head: %+v", head)
	}
	first := head.Next(AuditRecord{At: "2026-11-28T00:00:00Z", Actor: "admin-token", Action: "POST /admin/v1/merchants",
		Target: "merchant:m1", SourceIP: "127.0.0.1", Result: "200"})
	racing := head.Next(AuditRecord{At: "2026-11-28T00:00:01Z", Actor: "admin-token", Action: "POST /admin/v1/cluster/remove"})
	res := ts.apply(1, &command.Cmd{Audit: &first}, &command.Cmd{Audit: &racing})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrAuditOutOfOrder) {
		t.Fatalf("results: %v, %v", res[0].Err, res[1].Err)
	}
	head, _ = ts.AuditHead()
	second := head.Next(AuditRecord{At: "2026-11-28T00:00:02Z", Actor: "admin-token", Action: "x"})
	forged := second
	forged.Result = "200" // its hash no longer matches
	if r := ts.apply(2, &command.Cmd{Audit: &forged}); !errors.Is(r[0].Err, ErrAuditOutOfOrder) {
		t.Fatalf("a record whose hash does not match: %v", r[0].Err)
	}
	if r := ts.apply(3, &command.Cmd{Audit: &second}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	recs, more, err := ts.AuditRecords(0, 10)
	if err != nil || more || len(recs) != 2 || recs[0] != first || recs[1] != second {
		t.Fatalf("records %+v more %v err %v", recs, more, err)
	}
	if seq, err := VerifyAuditChain(AuditGenesis, 0, recs); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	if page, more, _ := ts.AuditRecords(0, 1); len(page) != 1 || !more {
		t.Fatalf("a page of one: %d records, more %v", len(page), more)
	}
	if page, _, _ := ts.AuditRecords(1, 10); len(page) != 1 || page[0].Seq != 2 {
		t.Fatalf("after 1: %+v", page)
	}
	// The hash is the contract's: the fields joined by "\n".
	if first.Hash != sha256hex(strings.Join([]string{"1", first.At, "admin-token", "POST /admin/v1/merchants",
		"merchant:m1", "127.0.0.1", "200", AuditGenesis}, "\n")) {
		t.Fatal("hash is not SHA-256 of the fields joined by newlines")
	}
}

func TestVerifyAuditChainNamesTheFirstBrokenRecord(t *testing.T) {
	head := AuditHead{Hash: AuditGenesis}
	var recs []AuditRecord
	for i := range 5 {
		r := head.Next(AuditRecord{At: "t", Actor: "a", Action: "act", Result: string(rune('0' + i))})
		recs = append(recs, r)
		head = AuditHead{Seq: r.Seq, Hash: r.Hash}
	}
	// Each tamper and the first record that no longer links: a changed
	// field breaks its own hash; a rehashed one breaks the next record's
	// prev_hash; a removed or swapped one breaks the sequence.
	for _, c := range []struct {
		name   string
		tamper func([]AuditRecord) []AuditRecord
		first  uint64
	}{
		{"field", func(r []AuditRecord) []AuditRecord { r[2].Target = "other"; return r }, 3},
		{"rehashed", func(r []AuditRecord) []AuditRecord { r[2].Target = "other"; r[2].Hash = r[2].ComputeHash(); return r }, 4},
		{"removed", func(r []AuditRecord) []AuditRecord { return append(r[:2], r[3:]...) }, 4},
		{"reordered", func(r []AuditRecord) []AuditRecord { r[2], r[3] = r[3], r[2]; return r }, 4},
	} {
		seq, err := VerifyAuditChain(AuditGenesis, 0, c.tamper(append([]AuditRecord(nil), recs...)))
		if err == nil || seq != c.first {
			t.Errorf("%s: broken at %d (%v), want %d", c.name, seq, err, c.first)
		}
	}
	if seq, err := VerifyAuditChain(AuditGenesis, 0, recs); err != nil {
		t.Fatalf("the untouched chain: %d %v", seq, err)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
