package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gatewayctl cluster speaks the admin API with the bearer token and turns
// the status into a table.
func TestClusterCommand(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"1.01","messages":{"authorization":["admin bearer token missing or wrong"]}}}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		switch r.URL.Path {
		case "/admin/v1/cluster":
			io.WriteString(w, `{"node_id":"n2","leader_id":"n1","term":4,"members":[
				{"id":"n1","raft_addr":"127.0.0.1:7001","http_addr":"127.0.0.1:8081","voter":true,"leader":true,"reachable":true,
				 "self":{"state":"Leader","term":4,"commit_index":120,"applied_index":118,"last_log_index":120,"last_snapshot_index":64,"digest":"0123456789abcdef"}},
				{"id":"n2","raft_addr":"127.0.0.1:7002","http_addr":"127.0.0.1:8082","voter":true,"reachable":true,
				 "self":{"state":"Follower","term":4,"commit_index":120,"applied_index":118,"last_log_index":120,"last_snapshot_index":64}},
				{"id":"n3","raft_addr":"127.0.0.1:7003","http_addr":"127.0.0.1:8083","voter":true,"reachable":false,"error":"dial tcp 127.0.0.1:8083: connect: connection refused"}]}`)
		default:
			io.WriteString(w, `{"status":"ok","members":[{"id":"n1","raft_addr":"127.0.0.1:7001","http_addr":"127.0.0.1:8081","voter":true,"leader":true}]}`)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := clusterCmd(args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := run("status", "--addr", addr, "--admin-token", "tok")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	for _, want := range []string{"leader n1, term 4 (as seen by n2)", "n1  Leader", "n2  Follower",
		"n3  ?", "no (dial tcp 127.0.0.1:8083", "0123456789ab"} {
		if !strings.Contains(out, want) {
			t.Errorf("status table lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ = run("status", "--addr", addr, "--admin-token", "tok", "--json", "--digest"); code != 0 || !strings.Contains(out, `"leader_id": "n1"`) {
		t.Errorf("status --json: %d %s", code, out)
	}
	if code, out, _ = run("join", "--addr", addr, "--admin-token", "tok", "--node-id", "n4", "--raft-addr", "h:1", "--http-addr", "h:2"); code != 0 || !strings.Contains(out, "ok; members now:") {
		t.Errorf("join: %d %s", code, out)
	}
	if code, _, _ = run("remove", "--addr", addr, "--admin-token", "tok", "--node-id", "n3"); code != 0 {
		t.Errorf("remove: %d", code)
	}
	if code, _, _ = run("transfer-leadership", "--addr", addr, "--admin-token", "tok"); code != 0 {
		t.Errorf("transfer: %d", code)
	}
	want := []string{
		"GET /admin/v1/cluster ",
		"GET /admin/v1/cluster?digest=1 ",
		`POST /admin/v1/cluster/join {"http_addr":"h:2","node_id":"n4","raft_addr":"h:1"}`,
		`POST /admin/v1/cluster/remove {"node_id":"n3"}`,
		`POST /admin/v1/cluster/transfer-leadership {"node_id":""}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Usage errors and a refused token.
	if code, _, errOut = run("join", "--addr", addr, "--admin-token", "tok", "--node-id", "n4"); code != 2 || !strings.Contains(errOut, "required") {
		t.Errorf("join without addresses: %d %s", code, errOut)
	}
	if code, _, _ = run("bogus"); code != 2 {
		t.Errorf("unknown subcommand: %d", code)
	}
	t.Setenv("GATEWAY_ADMIN_TOKEN", "")
	if code, _, _ = run("status", "--addr", addr); code != 2 {
		t.Errorf("no token: %d", code)
	}
	if code, _, errOut = run("status", "--addr", addr, "--admin-token", "wrong"); code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("wrong token: %d %s", code, errOut)
	}
}
