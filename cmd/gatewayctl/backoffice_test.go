package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/paygate/gateway/persistence"
)

// chain makes n linked records, as the FSM would hold them.
func chain(n int) []persistence.AuditRecord {
	head := persistence.AuditHead{Hash: persistence.AuditGenesis}
	var out []persistence.AuditRecord
	for i := range n {
		r := head.Next(persistence.AuditRecord{At: "2026-11-28T00:00:0" + strconv.Itoa(i) + "Z", Actor: "admin-token",
			Action: "POST /admin/v1/merchants", Target: "merchant:m" + strconv.Itoa(i), SourceIP: "127.0.0.1", Result: "200"})
		out = append(out, r)
		head = persistence.AuditHead{Seq: r.Seq, Hash: r.Hash}
	}
	return out
}

// auditServer serves recs as GET /admin/v1/audit does, two per page.
func auditServer(t *testing.T, recs []persistence.AuditRecord) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/v1/audit" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", 401)
			return
		}
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		page := auditPage{Records: []persistence.AuditRecord{}}
		for _, rec := range recs {
			if rec.Seq > after && len(page.Records) < 2 {
				page.Records = append(page.Records, rec)
			}
		}
		if n := len(page.Records); n > 0 && page.Records[n-1].Seq < recs[len(recs)-1].Seq {
			page.NextAfter = &page.Records[n-1].Seq
		}
		json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAuditVerifyCatchesATamperedRecord(t *testing.T) {
	good := chain(5)
	var out, errOut bytes.Buffer
	if code := auditCmd([]string{"verify", "--addr", auditServer(t, good), "--admin-token", "tok"}, &out, &errOut); code != 0 {
		t.Fatalf("intact chain: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "5 records") {
		t.Fatalf("verify output: %s", out.String())
	}
	tampered := chain(5)
	tampered[2].Result = "403" // record 3's fields no longer hash to its hash
	out.Reset()
	errOut.Reset()
	if code := auditCmd([]string{"verify", "--addr", auditServer(t, tampered), "--admin-token", "tok"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "broken at record 3") {
		t.Fatalf("tampered chain: exit %d: %s", code, errOut.String())
	}

	// The same through a file: what `audit list --json` printed, edited.
	out.Reset()
	if code := auditCmd([]string{"list", "--json", "--addr", auditServer(t, good), "--admin-token", "tok"}, &out, &errOut); code != 0 {
		t.Fatalf("list: %d %s", code, errOut.String())
	}
	file := filepath.Join(t.TempDir(), "audit.json")
	edited := strings.Replace(out.String(), `"target": "merchant:m3"`, `"target": "merchant:evil"`, 1)
	if edited == out.String() {
		t.Fatalf("the listing does not hold record 4's target: %s", out.String())
	}
	os.WriteFile(file, []byte(edited), 0o600)
	errOut.Reset()
	if code := auditCmd([]string{"verify", "--file", file}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "record 4") {
		t.Fatalf("edited file: exit %d: %s", code, errOut.String())
	}
}
