package node_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/persistence"
)

// A mixed session of admin calls, accepted and refused, leaves one linked
// audit record per state-changing call, read back page by page; reads are
// not recorded.
func TestAuditChainAfterAMixedAdminSession(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 100)
	n.Admin("POST", "/admin/v1/merchants", `{"rate_limit":5}`, nil)                // refused: 400
	n.Admin("POST", "/admin/v1/webhooks/ntf_none/redeliver", "", nil)              // refused: 404
	n.Admin("POST", "/admin/v1/cluster/remove", `{"node_id":"`+n.ID+`"}`, nil)     // refused: 409
	n.Admin("GET", "/admin/v1/orders?merchant_id="+url.QueryEscape(m.ID), "", nil) // a read
	n.Admin("POST", "/admin/v1/merchants", `{"name":"second"}`, nil)               // accepted
	want := []struct{ action, target, result string }{
		{"POST /admin/v1/merchants", "merchant:" + m.ID, "200"},
		{"POST /admin/v1/merchants", "merchants", "400 2.07"},
		{"POST /admin/v1/webhooks/ntf_none/redeliver", "notification:ntf_none", "404 2.05"},
		{"POST /admin/v1/cluster/remove", "node:" + n.ID, "409 0.03"},
		{"POST /admin/v1/merchants", "merchant:", "200"},
	}
	var recs []persistence.AuditRecord
	after := uint64(0)
	for pages := 0; pages < 10; pages++ {
		var page struct {
			Records   []persistence.AuditRecord `json:"records"`
			NextAfter *uint64                   `json:"next_after"`
		}
		if code, err := n.Admin("GET", "/admin/v1/audit?limit=2&after="+strconv.FormatUint(after, 10), "", &page); code != 200 {
			t.Fatalf("audit: %d %v", code, err)
		}
		recs = append(recs, page.Records...)
		if page.NextAfter == nil {
			break
		}
		after = *page.NextAfter
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Action != w.action || !strings.HasPrefix(r.Target, w.target) || r.Result != w.result ||
			r.Actor != "admin-token" || r.SourceIP != "127.0.0.1" || r.At == "" {
			t.Errorf("record %d: %+v, want %+v", i+1, r, w)
		}
	}
	if seq, err := persistence.VerifyAuditChain(persistence.AuditGenesis, 0, recs); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	if code, err := n.Admin("GET", "/admin/v1/audit?limit=0", "", nil); code != 422 || !strings.Contains(err.Error(), `"limit"`) {
		t.Fatalf("limit=0: %d %v", code, err)
	}
}
