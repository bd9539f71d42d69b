package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gatewayctl mids add posts the registration; list asks for one merchant's
// MIDs and prints a table; missing flags are usage errors (exit 2), and an
// error answer is shown with its code (exit 1).
func TestMIDsCommand(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		one := `{"mid":"MIDA","merchant_id":"mer_1","acquirer_addr":"acq.example:8583","currencies":["EUR","USD"],"registered_at":"2026-11-28T05:00:00Z"}`
		switch {
		case r.Method == "POST" && strings.Contains(string(body), `"MIDX"`):
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"5.06","messages":{"mid":["mid is already registered"]}}}`)
		case r.Method == "POST":
			io.WriteString(w, one)
		default:
			io.WriteString(w, `{"mids":[`+one+`]}`)
		}
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := midsCmd([]string{"add", "--addr", srv.URL, "--admin-token", "tok", "--mid", "MIDA", "--merchant-id", "mer_1",
		"--acquirer-addr", "acq.example:8583", "--currencies", "USD,EUR"}, &out, &errOut)
	if code != 0 || got[0] != `POST /admin/v1/mids {"acquirer_addr":"acq.example:8583","currencies":["USD","EUR"],"merchant_id":"mer_1","mid":"MIDA"}` ||
		!strings.Contains(out.String(), "MIDA  mer_1     acq.example:8583  EUR,USD") {
		t.Fatalf("add: %d %q %q %q", code, got, out.String(), errOut.String())
	}
	out.Reset()
	if code := midsCmd([]string{"list", "--addr", srv.URL, "--admin-token", "tok", "--merchant-id", "mer 1"}, &out, &errOut); code != 0 ||
		got[1] != `GET /admin/v1/mids?merchant_id=mer+1 ` || !strings.Contains(out.String(), "MIDA") {
		t.Fatalf("list: %d %q %q", code, got, out.String())
	}
	errOut.Reset()
	if code := midsCmd([]string{"add", "--addr", srv.URL, "--admin-token", "tok", "--mid", "MIDX", "--merchant-id", "mer_1",
		"--acquirer-addr", "acq.example:8583", "--currencies", "USD"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "5.06") {
		t.Fatalf("refused add: %d %q", code, errOut.String())
	}
	for _, args := range [][]string{
		{"add", "--admin-token", "tok", "--mid", "MIDA", "--merchant-id", "mer_1", "--currencies", "USD"},
		{"add", "--admin-token", "tok", "--merchant-id", "mer_1", "--acquirer-addr", "h:1", "--currencies", "USD"},
		{"remove"},
		{},
	} {
		if code := midsCmd(args, &out, &errOut); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}
