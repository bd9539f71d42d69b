// Package depcheck keeps the project's import graph pointing one way: the
// domain (order/) in the middle, storage and actors around it, the edges
// (transport/) outside, and the load harness (bench/) a client of the
// public API only. The allowed graph is data, a few lines of text in
// deps.txt read the way Go's own src/go/build/deps_test.go reads its rules;
// the package's test lists the real graph with `go list` and fails on any
// import the rules do not allow, and on any of the hard rules the project
// states (Forbidden) even if someone loosens deps.txt. It also checks that
// the README's layout table names every package, so the prose map of the
// tree cannot fall behind it either.
//
// Only this package's test runs it; nothing imports it.
package depcheck

import (
	"bufio"
	"fmt"
	"sort"
	"strings"
)

// Rules is a parsed allowed-import graph of a module's packages, relative
// to the module path ("order", "transport/server").
//
// A rule `a, b < c, d;` says c and d may import a and b, and whatever a and
// b may import. `NONE < x;` introduces a package that imports nothing of
// the module. A pattern ending in "/..." is the package and everything
// below it. Lines starting with # are comments. A rule written `a <test b;`
// applies to b's tests only (their imports on top of b's own).
type Rules struct {
	rules []rule
}

type rule struct {
	from, to []string // from < to
	test     bool
}

// Parse reads rules text.
func Parse(text string) (*Rules, error) {
	var r Rules
	var stmt strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		stmt.WriteString(" " + l)
		for {
			s := stmt.String()
			end := strings.Index(s, ";")
			if end < 0 {
				break
			}
			if err := r.add(strings.TrimSpace(s[:end])); err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			stmt.Reset()
			stmt.WriteString(s[end+1:])
		}
	}
	if strings.TrimSpace(stmt.String()) != "" {
		return nil, fmt.Errorf("rule without its closing ';': %q", strings.TrimSpace(stmt.String()))
	}
	return &r, nil
}

func (r *Rules) add(s string) error {
	if s == "" {
		return nil
	}
	op, test := " < ", false
	if strings.Contains(s, " <test ") {
		op, test = " <test ", true
	}
	lhs, rhs, ok := strings.Cut(s, op)
	if !ok {
		return fmt.Errorf("rule %q has no '<'", s)
	}
	list := func(x string) []string {
		var out []string
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p != "" && p != "NONE" {
				out = append(out, p)
			}
		}
		return out
	}
	to := list(rhs)
	if len(to) == 0 {
		return fmt.Errorf("rule %q allows nothing to anyone", s)
	}
	r.rules = append(r.rules, rule{from: list(lhs), to: to, test: test})
	return nil
}

// match reports whether pattern names pkg.
func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pattern == pkg
}

// Known reports whether some rule names pkg on its right: every package of
// the module must have its place in the graph.
func (r *Rules) Known(pkg string) bool {
	for _, ru := range r.rules {
		if ru.test {
			continue
		}
		for _, p := range ru.to {
			if match(p, pkg) {
				return true
			}
		}
	}
	return false
}

// Allows reports whether pkg may import imp (test: in its tests).
func (r *Rules) Allows(pkg, imp string, test bool) bool {
	return r.allows(pkg, imp, test, map[string]bool{})
}

func (r *Rules) allows(pkg, imp string, test bool, seen map[string]bool) bool {
	if seen[pkg] {
		return false
	}
	seen[pkg] = true
	for _, ru := range r.rules {
		if ru.test && !test {
			continue
		}
		applies := false
		for _, p := range ru.to {
			applies = applies || match(p, pkg)
		}
		if !applies {
			continue
		}
		for _, f := range ru.from {
			if match(f, imp) {
				return true
			}
			// What f may import, pkg may too; f stands for itself or, as a
			// pattern, for any package it names that imp could be below.
			if !strings.HasSuffix(f, "/...") && r.allows(f, imp, false, seen) {
				return true
			}
			if base, ok := strings.CutSuffix(f, "/..."); ok && r.allows(base, imp, false, seen) {
				return true
			}
		}
	}
	return false
}

// Package is one package of the module as `go list` shows it, paths
// relative to the module ("" prefix stripped); imports outside the module
// are kept whole.
type Package struct {
	Path        string
	Imports     []string // its non-test imports
	TestImports []string // its tests' imports (internal and external tests)
	Deps        []string // every package it depends on, transitively (non-test)
}

// Check returns every import of pkgs that rules do not allow, and every
// package rules do not place, sorted. Imports outside the module are the
// business of Forbidden, not of the graph.
func Check(rules *Rules, pkgs []Package, inModule func(string) bool) []string {
	var bad []string
	for _, p := range pkgs {
		if !rules.Known(p.Path) {
			bad = append(bad, fmt.Sprintf("%s: not placed in deps.txt", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if inModule(imp) && !rules.Allows(p.Path, imp, false) {
				bad = append(bad, fmt.Sprintf("%s imports %s: not allowed by deps.txt", p.Path, imp))
			}
		}
		for _, imp := range p.TestImports {
			if inModule(imp) && imp != p.Path && !rules.Allows(p.Path, imp, true) {
				bad = append(bad, fmt.Sprintf("%s's tests import %s: not allowed by deps.txt", p.Path, imp))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// A Ban is a hard rule of the project's design: no package matching Pkg may
// depend on one matching any of Not (Transitive: through any chain of
// imports; otherwise its own imports only, for packages such as net/http
// that libraries below it may use).
type Ban struct {
	Pkg        string
	Not        []string
	Transitive bool
	Why        string
}

// Forbidden is the list the issue that made this package states; deps.txt
// must imply it, and the test checks both.
var Forbidden = []Ban{
	{Pkg: "order/...", Transitive: true, Why: "the domain imports no edge, no storage, no actor",
		Not: []string{"transport/...", "actors/...", "persistence/...", "cluster/...", "node/...", "bench/...", "cmd/...",
			"net/http", "github.com/valyala/fasthttp"}},
	{Pkg: "actors/...", Transitive: true, Why: "actors return domain rejections; the front end maps them",
		Not: []string{"transport/server", "transport/api", "transport/apierr"}},
	{Pkg: "transport/webhook/...", Transitive: true, Why: "webhook delivery answers no merchant request and runs no order",
		Not: []string{"transport/server", "transport/api", "transport/apierr", "actors/...", "cluster/..."}},
	{Pkg: "persistence/...", Transitive: true, Why: "storage knows neither actors nor the HTTP edge",
		Not: []string{"actors/...", "transport/server", "transport/api", "transport/apierr", "transport/webhook"}},
	{Pkg: "persistence/...", Why: "storage speaks no HTTP",
		Not: []string{"net/http", "github.com/valyala/fasthttp"}},
	{Pkg: "transport/webhook/outbox", Transitive: true, Why: "the outbox's rules are pure: storage keeps them, the dispatcher sends",
		Not: []string{"persistence", "transport/webhook", "net/http", "github.com/valyala/fasthttp"}},
	{Pkg: "cluster/...", Transitive: true, Why: "the Raft plumbing applies commands; it answers no merchant",
		Not: []string{"transport/server", "transport/api", "transport/apierr", "actors/..."}},
	{Pkg: "transport/acquirer/...", Transitive: true, Why: "card rules come from the domain, not the API's validator",
		Not: []string{"transport/api", "transport/apierr", "transport/server"}},
	{Pkg: "bench/...", Transitive: true, Why: "the load harness is a client of the public API: its own client and the signing scheme",
		Not: []string{"order/...", "actors/...", "persistence/...", "cluster/...", "node/...", "cmd/...",
			"transport/server", "transport/api", "transport/apierr", "transport/acquirer/...", "transport/webhook", "transport/wallet/..."}},
}

// CheckBans returns every Ban pkgs break.
func CheckBans(bans []Ban, pkgs []Package) []string {
	var bad []string
	for _, b := range bans {
		for _, p := range pkgs {
			if !match(b.Pkg, p.Path) {
				continue
			}
			deps := p.Imports
			if b.Transitive {
				deps = p.Deps
			}
			for _, d := range deps {
				for _, n := range b.Not {
					if match(n, d) {
						bad = append(bad, fmt.Sprintf("%s depends on %s: %s", p.Path, d, b.Why))
					}
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}
