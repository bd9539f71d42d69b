package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gatewayctl merchants rotate-keys posts the pair and the overlap in
// seconds, and prints the new pair.
func TestMerchantsRotateKeysCommand(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = r.Method + " " + r.URL.Path + " " + string(body)
		io.WriteString(w, `{"merchant_id":"mer_1","pair":"api","public_key":"pk_n","secret_key":"sk_n","previous_public_key":"pk_o","previous_valid_until":"2026-11-28T03:00:00Z"}`)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := merchantsCmd([]string{"rotate-keys", "--addr", srv.URL, "--admin-token", "tok", "--merchant-id", "mer_1", "--pair", "api", "--overlap", "24h"}, &out, &errOut)
	if code != 0 || got != `POST /admin/v1/merchants/mer_1/rotate-keys {"overlap_seconds":86400,"pair":"api"}` || !strings.Contains(out.String(), `"secret_key": "sk_n"`) {
		t.Fatalf("%d %q %q %q", code, got, out.String(), errOut.String())
	}
	for _, args := range [][]string{
		{"rotate-keys", "--admin-token", "tok", "--merchant-id", "mer_1", "--pair", "sms"},
		{"rotate-keys", "--admin-token", "tok", "--merchant-id", "mer_1", "--pair", "api", "--overlap", "1500ms"},
		{"rotate-keys", "--admin-token", "tok", "--pair", "api"},
		{"list"},
	} {
		if code := merchantsCmd(args, &out, &errOut); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}
