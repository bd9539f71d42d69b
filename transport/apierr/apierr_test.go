package apierr

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// docs/api.md carries the catalogue table verbatim.
func TestDocsCarryTheCatalogue(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), MarkdownTable()) {
		t.Fatalf("docs/api.md is out of date with the catalogue; paste:\n%s", MarkdownTable())
	}
}

func TestBodyShape(t *testing.T) {
	e := New(Invalid, "currency", "currency should have exactly 3 characters")
	e.Add("customer.email", "customer.email is required")
	b, err := json.Marshal(e.Body(), json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"error":{"code":"2.01","messages":{"currency":["currency should have exactly 3 characters"],"customer.email":["customer.email is required"]}}}`
	if string(b) != want {
		t.Fatalf("got %s", b)
	}
	empty, _ := json.Marshal((&Error{Code: Internal}).Body())
	if string(empty) != `{"error":{"code":"5.03","messages":{}}}` {
		t.Fatalf("messages must be an object even when empty: %s", empty)
	}
}

func TestCatalogueCodesWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Catalogue() {
		if len(c.Code) != 4 || c.Code[1] != '.' || c.HTTP < 400 || c.Reason == "" {
			t.Errorf("malformed entry %+v", c)
		}
		key := fmt.Sprintf("%s/%d/%s", c.Code, c.HTTP, c.Reason)
		if seen[key] {
			t.Errorf("duplicate entry %+v", c)
		}
		seen[key] = true
	}
}

// 2.05 says "no such order" and nothing else, so a merchant's code that
// branches on error.code can tell a missing order from a wrong address
// (contract sections 3 and 15).
func TestOnlyAMissingOrderIs205(t *testing.T) {
	for _, c := range Catalogue() {
		if c.Code == NotFound.Code && c != NotFound {
			t.Errorf("%+v shares 2.05 with the missing order", c)
		}
	}
	if UnknownPath.Code != "0.01" || UnknownPath.HTTP != 404 {
		t.Errorf("unknown operation: %+v, want 404 0.01", UnknownPath)
	}
}
