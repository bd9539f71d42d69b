package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/internal/syncbuf"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// binary is acquirerd built once for the tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acquirerd-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "acquirerd")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type process struct {
	cmd    *exec.Cmd
	listen string
	admin  string
	exited chan struct{}
	logs   *syncbuf.Buffer // stderr after the start line
}

// start runs acquirerd on loopback ports of its choosing and reads them
// from its start line; extra are more flags.
func start(t *testing.T, dataDir string, extra ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--listen", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", dataDir}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), logs: &syncbuf.Buffer{}}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var l struct{ Msg, Listen, Admin_addr string }
		json.Unmarshal(lines.Bytes(), &l)
		if l.Msg == "acquirerd listening" {
			p.listen, p.admin = l.Listen, l.Admin_addr
			break
		}
	}
	if p.listen == "" {
		cmd.Process.Kill()
		t.Fatal("acquirerd did not say where it listens")
	}
	go func() { io.Copy(p.logs, stderr); cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	return p
}

func report(t *testing.T, admin string) [][]string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/settlement-report?date=" + time.Now().UTC().Format(time.DateOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// acquirerd as operators run it: a sale through a link lands in the day's
// settlement report; killed with SIGKILL and restarted on the same data
// directory, it answers the sale's repeat with its first answer and
// reports it once; POST /faults takes effect; SIGTERM stops it with 0.
func TestAcquirerdProcess(t *testing.T) {
	dir := t.TempDir()
	p := start(t, dir)
	c := link.Dial(link.Config{Addr: p.listen, Timeout: 5 * time.Second})
	defer c.Close()
	acq := link.NewAcquirer(c)
	sale := acquirer.AuthRequest{Reference: "txn-sale-1", PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2031",
		CVV: "123", Amount: 4200, Currency: "EUR", MerchantID: "m1", MID: "SHOP01", Sale: true}
	first, err := acq.Authorize(context.Background(), sale)
	if err != nil || !first.Approved {
		t.Fatalf("sale: %+v %v", first, err)
	}
	rows := report(t, p.admin)
	if len(rows) != 2 || strings.Join(rows[1][1:], ",") != "SHOP01,"+acquirer.RRN("txn-sale-1")+","+first.ARN+",sale,4200,EUR" {
		t.Fatalf("report %v", rows)
	}

	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p2 := start(t, dir)
	c2 := link.Dial(link.Config{Addr: p2.listen, Timeout: 5 * time.Second})
	defer c2.Close()
	acq2 := link.NewAcquirer(c2)
	again, err := acq2.Authorize(context.Background(), sale)
	// Trace is the answer's own STAN and time on this connection, not part
	// of the decision the host keeps.
	again.Trace, first.Trace = "", ""
	if err != nil || again != first {
		t.Fatalf("repeat after SIGKILL: %+v %v, want %+v", again, err, first)
	}
	if rows := report(t, p2.admin); len(rows) != 2 {
		t.Fatalf("report after the repeat: %v", rows)
	}

	resp, err := http.Post("http://"+p2.admin+"/faults", "application/json", strings.NewReader(`{"down":true}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("faults: %v %v", resp, err)
	}
	short := link.Dial(link.Config{Addr: p2.listen, Timeout: 300 * time.Millisecond})
	defer short.Close()
	if _, err := link.NewAcquirer(short).Authorize(context.Background(), acquirer.AuthRequest{Reference: "txn-down",
		PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2031", Amount: 1, Currency: "USD", MerchantID: "m1"}); err == nil {
		t.Fatal("a host that is down answered")
	}

	p2.cmd.Process.Signal(syscall.SIGTERM)
	<-p2.exited
	if code := p2.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// The HTTP side off loopback needs a token, and with one refuses requests
// without it.
func TestAdminToken(t *testing.T) {
	if code := run([]string{"--admin-addr", "0.0.0.0:0", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}); code != 2 {
		t.Fatalf("exit %d for an open admin address without a token, want 2", code)
	}
	h := requireToken("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for header, want := range map[string]int{"": 401, "Bearer wrong": 401, "Bearer s3cret": 200} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/faults", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d, want %d", header, rec.Code, want)
		}
	}
}

// acquirerd with --tls-cert-file, --tls-key-file and --client-ca-file: a
// node's link with the CA and a client certificate is served; a plaintext
// link, and a TLS one without a client certificate, get no answer and the
// refusal is logged. Half the TLS flags are refused at start.
func TestAcquirerdTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.CreateCAFiles(dir, "acquirer link CA"); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, pki.CACertFile)
	files := map[string][2]string{}
	for _, name := range []string{"acquirer", "node1"} {
		if _, err := pki.CreateNodeFiles(dir, name, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		files[name] = [2]string{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")}
	}
	for _, args := range [][]string{
		{"--tls-cert-file", files["acquirer"][0]},
		{"--client-ca-file", caFile},
	} {
		if code := run(append([]string{"--listen", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}

	p := start(t, t.TempDir(), "--tls-cert-file", files["acquirer"][0], "--tls-key-file", files["acquirer"][1], "--client-ca-file", caFile)
	sale := func(ref string) acquirer.AuthRequest {
		return acquirer.AuthRequest{Reference: ref, PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2031",
			CVV: "123", Amount: 700, Currency: "EUR", MerchantID: "m1", MID: "SHOP01", Sale: true}
	}
	refused := func(name string, cfg *tls.Config) {
		t.Helper()
		c := link.Dial(link.Config{Addr: p.listen, TLS: cfg, Timeout: 500 * time.Millisecond})
		defer c.Close()
		if r, err := link.NewAcquirer(c).Authorize(context.Background(), sale("txn-"+name)); err == nil {
			t.Fatalf("%s: answered %+v", name, r)
		}
	}
	refused("plaintext", nil)
	waitLog(t, p, "TLS handshake refused")
	noCert, err := link.ClientTLS(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	refused("no-client-cert", noCert)

	cfg, err := link.ClientTLS(caFile, files["node1"][0], files["node1"][1])
	if err != nil {
		t.Fatal(err)
	}
	c := link.Dial(link.Config{Addr: p.listen, TLS: cfg, Timeout: 5 * time.Second})
	defer c.Close()
	if r, err := link.NewAcquirer(c).Authorize(context.Background(), sale("txn-tls")); err != nil || !r.Approved {
		t.Fatalf("sale over mutual TLS: %+v %v", r, err)
	}
	// Only the sale over TLS moved money.
	if rows := report(t, p.admin); len(rows) != 2 || rows[1][2] != acquirer.RRN("txn-tls") {
		t.Fatalf("report %v", rows)
	}
}

// waitLog waits until p has logged want.
func waitLog(t *testing.T, p *process, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.logs.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("acquirerd did not log %q:\n%s", want, p.logs.String())
		}
	}
}
