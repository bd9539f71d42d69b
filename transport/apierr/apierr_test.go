package apierr

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
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

// declaredCodes reads the catalogue as written: every package-level
// variable of the package's source whose value is a Code literal, by name.
// The tests walk it rather than a list kept by hand, so an entry declared
// and left out of Catalogue() (and so out of the docs) fails them.
func declaredCodes(t *testing.T) map[string]Code {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	codes := map[string]Code{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok || fmt.Sprint(lit.Type) != "Code" {
						continue
					}
					codes[name.Name] = codeLiteral(t, name.Name, lit)
				}
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("no Code declared in the package's source")
	}
	return codes
}

// codeLiteral evaluates Code{"N.NN", status, "reason"}.
func codeLiteral(t *testing.T, name string, lit *ast.CompositeLit) Code {
	t.Helper()
	var parts []string
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			e = kv.Value
		}
		bl, ok := e.(*ast.BasicLit)
		if !ok {
			t.Fatalf("%s: not a literal: %T", name, e)
		}
		parts = append(parts, bl.Value)
	}
	if len(parts) != 3 {
		t.Fatalf("%s: %d fields", name, len(parts))
	}
	code, err1 := strconv.Unquote(parts[0])
	status, err2 := strconv.Atoi(parts[1])
	reason, err3 := strconv.Unquote(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("%s: %v %v %v", name, err1, err2, err3)
	}
	return Code{Code: code, HTTP: status, Reason: reason}
}

// Catalogue(), which the docs are written from, lists every declared
// entry, once.
func TestCatalogueListsEveryDeclaredCode(t *testing.T) {
	listed := map[Code]int{}
	for _, c := range Catalogue() {
		listed[c]++
	}
	declared := declaredCodes(t)
	for name, c := range declared {
		if listed[c] != 1 {
			t.Errorf("%s is listed %d times by Catalogue()", name, listed[c])
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("Catalogue() lists %d entries; the source declares %d", len(listed), len(declared))
	}
}

func TestCatalogueCodesWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range declaredCodes(t) {
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
