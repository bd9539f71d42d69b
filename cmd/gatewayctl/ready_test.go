package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ready exits 0 on a 200 from /readyz, 1 on any other answer or none, and
// asks /readyz, not another path.
func TestReady(t *testing.T) {
	status := http.StatusServiceUnavailable
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"x"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	var out, errOut bytes.Buffer
	if code := readyCmd([]string{"--addr", addr}, &out, &errOut); code != 1 {
		t.Errorf("503: exit %d, want 1 (%s)", code, errOut.String())
	}
	status = http.StatusOK
	if code := readyCmd([]string{"--addr", "http://" + addr}, &out, &errOut); code != 0 {
		t.Errorf("200: exit %d, want 0 (%s)", code, errOut.String())
	}
	for _, p := range paths {
		if p != "/readyz" {
			t.Errorf("asked %s", p)
		}
	}
	srv.Close()
	if code := readyCmd([]string{"--addr", addr, "--timeout", "1s"}, &out, &errOut); code != 1 {
		t.Errorf("no server: exit %d, want 1", code)
	}
	if code := readyCmd([]string{"--addr", addr + "/readyz"}, &out, &errOut); code != 2 {
		t.Errorf("an address with a path: exit %d, want 2", code)
	}
}

func TestLocalAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:8080":  "127.0.0.1:8080",
		"[::]:8080":     "127.0.0.1:8080",
		":8080":         "127.0.0.1:8080",
		"10.0.0.5:8080": "10.0.0.5:8080",
		"node1:8080":    "node1:8080",
		"http://h:1":    "http://h:1",
	} {
		if got := localAddr(in); got != want {
			t.Errorf("localAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
