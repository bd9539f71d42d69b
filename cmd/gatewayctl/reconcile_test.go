package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/acquirer/reconcile"
)

// reconcileServer answers POST /admin/v1/reconcile with res after checking
// the token and that the report arrived as the body.
func reconcileServer(t *testing.T, report string, res reconcile.Result) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.URL.Path != "/admin/v1/reconcile" || r.Header.Get("Authorization") != "Bearer tok" ||
			string(body) != report {
			w.WriteHeader(400)
			return
		}
		json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestReconcileExitsOneOnADifference(t *testing.T) {
	report := "date,mid,rrn,arn,type,amount,currency\n2026-11-28,m,RRN1,,sale,100,USD\n"
	file := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(file, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	clean := reconcile.Result{Dates: []string{"2026-11-28"}, Matched: 1}
	dirty := clean
	dirty.Mismatches = []reconcile.Mismatch{{Acquirer: reconcile.Entry{RRN: "RRN1", Type: "sale", Amount: 100, Currency: "USD"},
		Gateway: reconcile.Entry{RRN: "RRN1", Type: "sale", Amount: 90, Currency: "USD"}}}
	for _, tc := range []struct {
		res  reconcile.Result
		code int
		want string
	}{
		{clean, 0, "1 matched, 0 missing at the acquirer, 0 missing at the gateway, 0 mismatched"},
		{dirty, 1, "mismatch: sale RRN1 acquirer 100 USD, gateway 90 USD"},
	} {
		srv := reconcileServer(t, report, tc.res)
		var out, errOut bytes.Buffer
		code := reconcileCmd([]string{"--addr", srv.URL, "--admin-token", "tok", "--report", file}, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := reconcileCmd([]string{"--admin-token", "tok"}, &out, &errOut); code != 2 {
		t.Fatalf("without --report: exit %d", code)
	}
}
