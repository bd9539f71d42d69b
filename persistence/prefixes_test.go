package persistence

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"
)

// Every kind of record has its own key prefix, and none is a prefix of
// another: two features that picked the same letter would read each
// other's records (MIDs and operators both took "u/" on their branches).
// The prefixes are read from the package's source, so a new one is
// checked without being listed here.
func TestKeyPrefixesAreDistinct(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]string{} // value → constant
	for _, pkg := range pkgs {
		ast.Inspect(pkg, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "prefix") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				if other, dup := prefixes[v]; dup {
					t.Errorf("%s and %s are both %q", other, name.Name, v)
				}
				prefixes[v] = name.Name
			}
			return true
		})
	}
	if len(prefixes) < 20 {
		t.Fatalf("found only %d key prefixes in the source: the test no longer reads them", len(prefixes))
	}
	for a, na := range prefixes {
		for b, nb := range prefixes {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("%s %q is a prefix of %s %q: a scan of one reads the other", na, a, nb, b)
			}
		}
	}
}
