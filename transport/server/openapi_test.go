package server

import (
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/paygate/gateway/docs"
)

// The OpenAPI document (docs/openapi.yaml) has a POST path for every
// merchant operation the server routes, and none it does not: the node
// package's TestOpenAPIDocument then holds each one's answers to it.
func TestOpenAPIListsEveryOperation(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(docs.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, methods := range doc.Paths {
		if _, ok := methods["post"]; ok {
			documented[strings.TrimPrefix(path, "/")] = true
		}
	}
	var missing []string
	for op := range (&Server{}).merchantEndpoints() {
		if !documented[op] {
			missing = append(missing, op)
		}
		delete(documented, op)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/openapi.yaml has no POST path for %v", missing)
	}
	if len(documented) > 0 {
		t.Errorf("docs/openapi.yaml has POST paths the server does not route: %v", documented)
	}
	if _, ok := doc.Paths[strings.TrimPrefix(openAPIPath, "/api/v3")]["get"]; !ok {
		t.Errorf("docs/openapi.yaml does not list its own path %s", openAPIPath)
	}
}
