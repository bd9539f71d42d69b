package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
	if code, out, _ = run("transfer-leadership", "--addr", addr, "--admin-token", "tok"); code != 0 || !strings.Contains(out, "leader is now n1") {
		t.Errorf("transfer: %d %s", code, out)
	}
	want := []string{
		"GET /admin/v1/cluster ",
		"GET /admin/v1/cluster?digest=1 ",
		`POST /admin/v1/cluster/join {"http_addr":"h:2","node_id":"n4","raft_addr":"h:1"}`,
		`POST /admin/v1/cluster/remove {"node_id":"n3"}`,
		`POST /admin/v1/cluster/transfer-leadership {"node_id":""}`,
		"GET /admin/v1/cluster ", // the leader after the transfer
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
	if code, _, errOut = run("status", "--addr", addr, "--admin-token", "wrong"); code != 1 || !strings.Contains(errOut, "401 1.01: authorization: admin bearer token missing or wrong") {
		t.Errorf("wrong token: %d %s", code, errOut)
	}
}

// adminStub answers the admin API from a function and records the requests
// it saw, so a test can tell that a refused command sent nothing.
func adminStub(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (addr string, requests *[]string) {
	t.Helper()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &got
}

// Go's flag package stops at the first word that is not a flag: a word
// left over used to be ignored with every flag after it, so
// `transfer-leadership node3` printed ok and handed leadership to any node.
// Every subcommand refuses it before sending anything.
func TestClusterRefusesLeftoverArguments(t *testing.T) {
	addr, got := adminStub(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok","node_id":"n1","leader_id":"n1","members":[{"id":"n1","voter":true,"leader":true,"reachable":true,"self":{"state":"Leader"}}]}`)
	})
	// What an ignored --addr would fall back to: the stub, so that the
	// command would succeed if it ignored the leftover word.
	t.Setenv("GATEWAY_HTTP_ADDR", addr)
	t.Setenv("GATEWAY_ADMIN_TOKEN", "secret-tok")
	for _, tc := range []struct {
		args  []string
		extra string
	}{
		{[]string{"transfer-leadership", "node3"}, "node3"},
		{[]string{"transfer-leadership", "--addr", addr, "node3", "--node-id", "n2"}, "node3"},
		{[]string{"status", "extra", "--addr", "127.0.0.1:1"}, "extra"},
		{[]string{"join", "--node-id", "n4", "--raft-addr", "h:1", "--http-addr", "h:2", "n5"}, "n5"},
		{[]string{"remove", "--node-id", "n3", "n4"}, "n4"},
	} {
		var out, errOut bytes.Buffer
		code := clusterCmd(tc.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), `unexpected argument "`+tc.extra+`"`) ||
			!strings.Contains(errOut.String(), "-admin-token") || strings.Contains(errOut.String(), "secret-tok") {
			t.Errorf("%v: exit %d, want 2 with the word and the usage (without the token)\nstdout: %s\nstderr: %s", tc.args, code, out.String(), errOut.String())
		}
	}
	if len(*got) > 0 {
		t.Errorf("refused commands sent %v", *got)
	}
}

// An error answer in the contract's shape reads as text; anything else is
// shown as it came.
func TestClusterErrorMessages(t *testing.T) {
	addr, _ := adminStub(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("case") {
		case "":
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"1.01","messages":{"authorization":["admin bearer token missing or wrong"]}}}`)
		case "many":
			w.WriteHeader(422)
			io.WriteString(w, `{"error":{"code":"2.01","messages":{"raft_addr":["does not answer"],"node_id":["too long","bad characters"]}}}`)
		case "proxy":
			w.WriteHeader(502)
			io.WriteString(w, "upstream down\n")
		case "other-json":
			w.WriteHeader(500)
			io.WriteString(w, `{"error":"boom"}`)
		}
	})
	var out, errOut bytes.Buffer
	if code := clusterCmd([]string{"status", "--addr", addr, "--admin-token", "wrong"}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if want := "gatewayctl cluster status: 401 1.01: authorization: admin bearer token missing or wrong\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	c := &adminClient{base: "http://" + addr, token: "tok"}
	for query, want := range map[string]string{
		"many":       "422 2.01: node_id: too long; node_id: bad characters; raft_addr: does not answer",
		"proxy":      "HTTP 502: upstream down",
		"other-json": `HTTP 500: {"error":"boom"}`,
	} {
		if _, err := c.do("GET", "/admin/v1/cluster?case="+query, nil); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", query, err, want)
		}
	}
}

// transfer-leadership waits for the new leader and names it: the members
// its answer lists were read before any node led, so every row said LEADER
// no. A node that still names the old leader (a follower that has not yet
// heard from the new one) is not taken for an answer: the leader named must
// say so itself.
func TestClusterTransferLeadershipNamesTheNewLeader(t *testing.T) {
	views := []string{
		`{"node_id":"n1","leader_id":"","term":5,"members":[
			{"id":"n1","voter":true,"reachable":true,"self":{"state":"Follower"}},
			{"id":"n2","voter":true,"reachable":true,"self":{"state":"Candidate"}}]}`,
		`{"node_id":"n3","leader_id":"n1","term":5,"members":[
			{"id":"n1","voter":true,"leader":true,"reachable":true,"self":{"state":"Follower"}},
			{"id":"n2","voter":true,"reachable":true,"self":{"state":"Leader"}}]}`,
		`{"node_id":"n1","leader_id":"n2","term":5,"members":[
			{"id":"n1","raft_addr":"h:7001","http_addr":"h:8081","voter":true,"reachable":true,"self":{"state":"Follower"}},
			{"id":"n2","raft_addr":"h:7002","http_addr":"h:8082","voter":true,"leader":true,"reachable":true,"self":{"state":"Leader"}}]}`,
	}
	seen := 0
	addr, got := adminStub(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			// The old leader's view right after it stepped down.
			io.WriteString(w, `{"status":"ok","members":[{"id":"n1","voter":true},{"id":"n2","voter":true}]}`)
			return
		}
		io.WriteString(w, views[min(seen, len(views)-1)])
		seen++
	})
	var out, errOut bytes.Buffer
	if code := clusterCmd([]string{"transfer-leadership", "--addr", addr, "--admin-token", "tok"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "leader is now n2") || !regexp.MustCompile(`(?m)^n2\s+yes\s+yes\s`).MatchString(out.String()) ||
		!regexp.MustCompile(`(?m)^n1\s+yes\s+no\s`).MatchString(out.String()) {
		t.Errorf("output does not name n2 as the leader:\n%s", out.String())
	}
	if len(*got) != 4 {
		t.Errorf("requests %v, want the transfer and three status reads", *got)
	}

	out.Reset()
	if code := clusterCmd([]string{"transfer-leadership", "--addr", addr, "--admin-token", "tok", "--json"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), `"leader_id": "n2"`) {
		t.Errorf("--json: exit %d\n%s", code, out.String())
	}

	// No leader within the wait: said, and exit 1.
	defer func(d time.Duration) { leaderWait = d }(leaderWait)
	leaderWait = 300 * time.Millisecond
	seen = 0
	views = views[:1]
	out.Reset()
	errOut.Reset()
	if code := clusterCmd([]string{"transfer-leadership", "--addr", addr, "--admin-token", "tok"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "no leader") {
		t.Errorf("no leader: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
}

// --addr is a member's HTTP address, as --join takes it: host:port,
// http://host:port or https://host:port. Paths are refused instead of being
// turned into http://https://h:p.
func TestClusterAddr(t *testing.T) {
	addr, _ := adminStub(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"node_id":"n1","leader_id":"n1","term":1,"members":[]}`)
	})
	for _, ok := range []string{addr, "http://" + addr, "http://" + addr + "/"} {
		var out, errOut bytes.Buffer
		if code := clusterCmd([]string{"status", "--addr", ok, "--admin-token", "tok"}, &out, &errOut); code != 0 {
			t.Errorf("--addr %s: exit %d %s", ok, code, errOut.String())
		}
	}
	// A host alone is port 80: a member behind a proxy.
	for in, want := range map[string]string{"gw.internal": "http://gw.internal", "http://lb/": "http://lb",
		"[::1]:8080": "http://[::1]:8080", "https://gw.example:8443": "https://gw.example:8443"} {
		if got, err := memberURL(in); err != nil || got != want {
			t.Errorf("memberURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for bad, want := range map[string]string{
		addr + "/admin/v1":       "host:port, http://host:port or https://host:port",
		"http://" + addr + "/x":  "host:port, http://host:port or https://host:port",
		"localhost:":             "host:port, http://host:port or https://host:port",
		"http://:8080":           "host:port, http://host:port or https://host:port",
		"ftp://" + addr:          "host:port, http://host:port or https://host:port",
		"http://https://" + addr: "host:port, http://host:port or https://host:port",
	} {
		var out, errOut bytes.Buffer
		if code := clusterCmd([]string{"status", "--addr", bad, "--admin-token", "tok"}, &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), want) || !strings.Contains(errOut.String(), strconv.Quote(bad)) {
			t.Errorf("--addr %s: exit %d, want 2 saying %q: %s", bad, code, want, errOut.String())
		}
	}
}
