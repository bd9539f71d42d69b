package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygate/gateway/persistence/backup"
)

// gatewayctl backup writes a verified file and prints its checksum; a
// stream cut short leaves no file, and exits 1.
func TestBackupCommand(t *testing.T) {
	var whole bytes.Buffer
	w, _ := backup.NewWriter(&whole, backup.Header{AppliedIndex: 7, NodeID: "n1"})
	w.Write([]byte{0})
	sum, _ := w.Finish()
	cut := false
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/v1/backup" || r.Header.Get("Authorization") != "Bearer tok" {
			rw.WriteHeader(401)
			io.WriteString(rw, `{"error":{"code":"1.01","messages":{"authorization":["admin bearer token missing or wrong"]}}}`)
			return
		}
		b := whole.Bytes()
		if cut {
			b = b[:len(b)-20]
		}
		rw.Write(b)
	}))
	defer srv.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "g.pgbak")
	run := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := backupCmd(args, &o, &e)
		return code, o.String(), e.String()
	}
	code, stdout, stderr := run("--addr", srv.URL, "--admin-token", "tok", "--out", out)
	if code != 0 || !strings.Contains(stdout, "sha256 "+sum) || !strings.Contains(stdout, "applied index 7") {
		t.Fatalf("backup: %d %q %q", code, stdout, stderr)
	}
	if code, stdout, _ := run("--verify", out); code != 0 || !strings.Contains(stdout, sum) {
		t.Fatalf("verify: %d %q", code, stdout)
	}
	cut = true
	out2 := filepath.Join(dir, "cut.pgbak")
	if code, _, stderr := run("--addr", srv.URL, "--admin-token", "tok", "--out", out2); code != 1 || !strings.Contains(stderr, "truncated") {
		t.Fatalf("cut stream: %d %q", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a cut stream left files: %v", entries)
	}
	if code, _, stderr := run("--addr", srv.URL, "--admin-token", "wrong", "--out", out2); code != 1 || !strings.Contains(stderr, "401 1.01") {
		t.Fatalf("wrong token: %d %q", code, stderr)
	}
}
