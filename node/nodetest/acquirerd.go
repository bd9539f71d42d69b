package nodetest

import (
	"encoding/csv"
	"github.com/paygate/gateway/internal/syncbuf"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// AcquirerdBinary builds cmd/acquirerd once per test process and returns
// its path (removed by Run).
func AcquirerdBinary(t testing.TB) string { return acquirerdBinary.build(t, "acquirerd") }

// Acquirerd is a sandbox acquirer host process (cmd/acquirerd).
type Acquirerd struct {
	t         testing.TB
	Listen    string // ISO 8583
	AdminAddr string // HTTP
	DataDir   string
	Args      []string // more flags (--tls-cert-file …)
	cmd       *exec.Cmd
	logs      *syncbuf.Buffer
	exited    chan struct{}
}

// StartAcquirerd starts acquirerd on free loopback ports with its ledger
// in a new temporary directory and args as more flags, and waits until it
// answers.
func StartAcquirerd(t testing.TB, args ...string) *Acquirerd {
	t.Helper()
	a := &Acquirerd{t: t, Listen: FreeAddr(t), AdminAddr: FreeAddr(t), DataDir: t.TempDir(), Args: args}
	a.start()
	t.Cleanup(a.Kill)
	return a
}

func (a *Acquirerd) start() {
	a.t.Helper()
	a.logs = &syncbuf.Buffer{}
	a.cmd = exec.Command(AcquirerdBinary(a.t), append([]string{"--listen", a.Listen, "--admin-addr", a.AdminAddr, "--data-dir", a.DataDir}, a.Args...)...)
	a.cmd.Stderr = keepLog(a.t, "acquirerd", a.logs)
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { cmd.Wait(); close(exited) }(a.cmd, a.exited)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get("http://" + a.AdminAddr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("acquirerd did not come up:\n%s", a.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logs is what the process wrote to stderr.
func (a *Acquirerd) Logs() string { return a.logs.String() }

// Kill stops the process with SIGKILL.
func (a *Acquirerd) Kill() {
	if a.cmd != nil && a.cmd.Process != nil {
		a.cmd.Process.Kill()
		<-a.exited
	}
}

// Restart kills the process and starts it again on the same ports and ledger.
func (a *Acquirerd) Restart() {
	a.t.Helper()
	a.Kill()
	a.start()
}

// SetFaults posts a faults body (JSON) to POST /faults.
func (a *Acquirerd) SetFaults(body string) {
	a.t.Helper()
	resp, err := http.Post("http://"+a.AdminAddr+"/faults", "application/json", strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		a.t.Fatalf("faults %s: %d", body, resp.StatusCode)
	}
}

// Report returns the settlement report of date (YYYY-MM-DD), header row
// first.
func (a *Acquirerd) Report(date string) [][]string {
	a.t.Helper()
	resp, err := http.Get("http://" + a.AdminAddr + "/settlement-report?date=" + date)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		a.t.Fatal(err)
	}
	return rows
}
