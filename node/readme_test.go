package node_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// readmeCommand returns the shell command in the code block after marker.
func readmeCommand(t *testing.T, root, marker string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- " + marker + " -->\\s*```sh\\n(.*?)\\n```")
	m := re.FindSubmatch(data)
	if m == nil {
		t.Fatalf("README has no %s block", marker)
	}
	return strings.TrimSpace(string(m[1]))
}

// The README's run command works word for word: it starts a node that
// prints a sandbox merchant and a signed curl, and that curl charges.
// Only the addresses and the data dir move, through the documented
// GATEWAY_* variables, so the test does not collide with anything on 8080.
func TestReadmeQuickstart(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	run := readmeCommand(t, root, "quickstart-run")
	if run != "go run ./cmd/gatewayd --dev" {
		t.Fatalf("README run command changed to %q: update this test with it", run)
	}
	if test := readmeCommand(t, root, "quickstart-test"); test != "./scripts/test" {
		t.Fatalf("README test command is %q", test)
	}
	if b, err := os.ReadFile(filepath.Join(root, ".ci", "run")); err != nil || !strings.Contains(string(b), "./scripts/test") {
		t.Fatal(".ci/run must call the README's test command")
	}

	cmd := exec.Command("bash", "-c", run)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"GATEWAY_HTTP_ADDR="+nodetest.FreeAddr(t),
		"GATEWAY_RAFT_ADDR="+nodetest.FreeAddr(t),
		"GATEWAY_DATA_DIR="+t.TempDir(),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	}()

	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var curl strings.Builder
	inCurl := false
	deadline := time.After(3 * time.Minute)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("gatewayd exited before printing the curl example")
			}
			if strings.HasPrefix(strings.TrimSpace(l), "curl ") {
				inCurl = true
			}
			if inCurl {
				curl.WriteString(l + "\n")
				if !strings.HasSuffix(l, `\`) {
					done = true
				}
			}
		case <-deadline:
			t.Fatal("no curl example printed")
		}
	}
	out, err := exec.Command("bash", "-c", curl.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("printed curl failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"status":"processing"`) {
		t.Fatalf("printed curl did not charge: %s", out)
	}
}
