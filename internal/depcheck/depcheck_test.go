package depcheck

import (
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

//go:embed deps.txt
var depsTxt string

const module = "github.com/paygate/gateway"

// listModule lists the module's packages with `go list`, paths relative to
// the module.
func listModule(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps=false", "-json=ImportPath,Imports,TestImports,XTestImports,Deps,Error", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) string {
		if p == module {
			return "."
		}
		if r, ok := strings.CutPrefix(p, module+"/"); ok {
			return r
		}
		return p
	}
	rels := func(l []string) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = rel(p)
		}
		return out
	}
	var pkgs []Package
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Deps                               []string
			Error                              *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, Package{Path: rel(p.ImportPath), Imports: rels(p.Imports),
			TestImports: rels(append(p.TestImports, p.XTestImports...)), Deps: rels(p.Deps)})
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: run from the module", len(pkgs))
	}
	return pkgs
}

func inModule(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".") && !isStd(first)
}

// isStd tells a standard-library path from a module-relative one by its
// first element: the module's top-level folders are few and known.
func isStd(first string) bool {
	switch first {
	case "order", "actors", "persistence", "cluster", "transport", "node", "bench", "cmd", "internal":
		return false
	}
	return true
}

// The module's imports follow deps.txt, and no package breaks a hard rule.
func TestImportGraph(t *testing.T) {
	rules, err := Parse(depsTxt)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listModule(t)
	for _, e := range Check(rules, pkgs, inModule) {
		t.Error(e)
	}
	for _, e := range CheckBans(Forbidden, pkgs) {
		t.Error(e)
	}
}

// deps.txt itself implies the hard rules: loosening it to allow a banned
// import fails here before any code uses the new edge.
func TestRulesImplyTheBans(t *testing.T) {
	rules, err := Parse(depsTxt)
	if err != nil {
		t.Fatal(err)
	}
	var placed []string
	for _, p := range listModule(t) {
		placed = append(placed, p.Path)
	}
	for _, b := range Forbidden {
		for _, p := range placed {
			if !match(b.Pkg, p) {
				continue
			}
			for _, q := range placed {
				for _, n := range b.Not {
					if match(n, q) && rules.Allows(p, q, false) {
						t.Errorf("deps.txt lets %s import %s: %s", p, q, b.Why)
					}
				}
			}
		}
	}
}

// The checker fails on the imports it exists to catch: a made-up graph
// with each forbidden edge added is refused.
func TestCheckerCatchesForbiddenImports(t *testing.T) {
	rules, err := Parse(depsTxt)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pkg, imp string }{
		{"order", "transport/api"},
		{"order/card", "transport/apierr"},
		{"actors", "transport/apierr"},
		{"actors", "transport/server"},
		{"persistence", "actors"},
		{"persistence", "transport/server"},
		{"cluster", "transport/api"},
		{"transport/webhook/outbox", "persistence"},
		{"transport/webhook/outbox", "transport/webhook"},
		{"transport/acquirer", "transport/api"},
		{"bench", "transport/webhook"},
		{"bench", "order"},
		{"bench", "node"},
	} {
		pkgs := []Package{{Path: tc.pkg, Imports: []string{tc.imp}, Deps: []string{tc.imp}}}
		if bad := Check(rules, pkgs, inModule); len(bad) == 0 {
			t.Errorf("deps.txt allows %s to import %s", tc.pkg, tc.imp)
		}
		if bad := CheckBans(Forbidden, pkgs); len(bad) == 0 {
			t.Errorf("no ban refuses %s importing %s", tc.pkg, tc.imp)
		}
	}
	// Storage may not speak HTTP itself (libraries below it may).
	http := []Package{{Path: "persistence", Imports: []string{"net/http"}}}
	if len(CheckBans(Forbidden, http)) == 0 {
		t.Error("persistence importing net/http passed")
	}
	// And what is allowed passes: the front end over the actors, a test's
	// own extra imports only in its tests.
	if !rules.Allows("transport/server", "order", false) || !rules.Allows("node", "order/card", false) {
		t.Error("transitive allowance lost")
	}
	if rules.Allows("bench", "node/nodetest", false) || !rules.Allows("bench", "node/nodetest", true) {
		t.Error("a <test rule leaked outside the tests, or was lost in them")
	}
	if bad := Check(rules, []Package{{Path: "nowhere/new"}}, inModule); len(bad) != 1 {
		t.Errorf("an unplaced package passed: %v", bad)
	}
}

func TestParseRefusesBrokenRules(t *testing.T) {
	for _, text := range []string{"a < b", "a b;", "a < ;"} {
		if _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q) accepted", text)
		}
	}
}

// The README's layout table names every package (by its path, its folder
// or its last element), so a package added or moved without a word there
// fails here. Packages under an internal/ folder are their parent's detail.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "## Layout")
	end := strings.Index(string(readme)[start:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("README.md has no Layout section")
	}
	layout := string(readme)[start : start+end]
	for _, p := range listModule(t) {
		if strings.Contains(p.Path, "internal/") && p.Path != "internal/depcheck" {
			continue
		}
		last := p.Path[strings.LastIndex(p.Path, "/")+1:]
		if !strings.Contains(layout, "`"+p.Path+"`") && !strings.Contains(layout, "`"+p.Path+"/`") &&
			!strings.Contains(layout, "`"+last+"`") {
			t.Errorf("README.md's layout table does not name %s", p.Path)
		}
	}
}
