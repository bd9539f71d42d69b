package signature

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The verification snippet merchants copy from docs/webhooks.md compiles
// and accepts a real gateway signature (and refuses a tampered body).
func TestWebhookDocSnippetVerifies(t *testing.T) {
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- verify-snippet -->\\s*```go\\n(.*?)\\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/webhooks.md has no verify-snippet")
	}
	src := string(m[1])
	// Replace main with a check of verify against this package's Sign.
	src = src[:strings.Index(src, "func main()")] + `
func main() {
	body := []byte(os.Args[3])
	if !verify(os.Args[1], os.Args[2], body, os.Args[4]) { os.Exit(1) }
	if verify(os.Args[1], os.Args[2], append(body, ' '), os.Args[4]) { os.Exit(2) }
	_ = http.StatusOK
	_ = io.EOF
}
`
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module snippet\n\ngo 1.22\n"), 0o644)
	body := `{"order_id":"o-1","status":"authorized"}`
	sig := Sign("whpk_1", "whsk_1", []byte(body))
	cmd := exec.Command("go", "run", ".", "whpk_1", "whsk_1", body, sig)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("snippet: %v\n%s", err, out)
	}
}
