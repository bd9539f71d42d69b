package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/paygate/gateway/docs"
)

// OpenAPI holds merchant API answers to the OpenAPI document the node
// serves (docs/openapi.yaml), and remembers which operation answered which
// status, so a test can tell what the document's checks have covered.
type OpenAPI struct {
	doc  *openapi3.T
	mu   sync.Mutex
	seen map[string]bool // "/charge 200"
}

// LoadOpenAPI reads and validates the document compiled into the node.
func LoadOpenAPI() (*OpenAPI, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	return &OpenAPI{doc: doc, seen: map[string]bool{}}, nil
}

// Doc is the loaded document.
func (o *OpenAPI) Doc() *openapi3.T { return o.doc }

// Documents reports whether the document has POST /op.
func (o *OpenAPI) Documents(op string) bool { return o.operation(op) != nil }

func (o *OpenAPI) operation(op string) *routers.Route {
	item := o.doc.Paths.Value("/" + op)
	if item == nil || item.Post == nil {
		return nil
	}
	return &routers.Route{Spec: o.doc, Server: o.doc.Servers[0], Path: "/" + op, PathItem: item, Method: http.MethodPost, Operation: item.Post}
}

func (o *OpenAPI) input(op string, body []byte, headers []string) (*openapi3filter.RequestValidationInput, error) {
	route := o.operation(op)
	if route == nil {
		return nil, fmt.Errorf("docs/openapi.yaml has no POST /%s", op)
	}
	req, _ := http.NewRequest(http.MethodPost, o.doc.Servers[0].URL+"/"+op, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("merchant", "x")
	req.Header.Set("signature", "x")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return &openapi3filter.RequestValidationInput{
		Request: req, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}, nil
}

// CheckRequest holds a request body (one the node accepts) to the
// operation's request schema.
func (o *OpenAPI) CheckRequest(op string, body []byte, headers ...string) error {
	in, err := o.input(op, body, headers)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), in)
}

// CheckAnswer holds the node's answer to POST /op to the document: its
// status must be one the operation lists, and its headers and body must
// match that response's schema. Operations the document does not have are
// not checked (an unknown operation's 404, tests of the router).
func (o *OpenAPI) CheckAnswer(op string, body []byte, r *Response) error {
	if !o.Documents(op) {
		return nil
	}
	in, err := o.input(op, body, nil)
	if err != nil {
		return err
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("POST /%s answered %d %s:\n%w", op, r.Status, r.Body, err)
	}
	o.mu.Lock()
	o.seen[fmt.Sprintf("/%s %d", op, r.Status)] = true
	o.mu.Unlock()
	return nil
}

// Seen lists "/op status" for every answer CheckAnswer passed.
func (o *OpenAPI) Seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for k := range o.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SawStatus reports whether some operation answered status (as "4xx"-free
// text, e.g. "429") and passed the check.
func (o *OpenAPI) SawStatus(op string, status int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op != "" {
		return o.seen[fmt.Sprintf("/%s %d", op, status)]
	}
	for k := range o.seen {
		if strings.HasSuffix(k, fmt.Sprintf(" %d", status)) {
			return true
		}
	}
	return false
}

// AnswerCheck, when set, checks every answer Merchant.Post receives; a
// failure fails the test that posted. A package's TestMain sets it to hold
// all its end-to-end tests' answers to the OpenAPI document.
var AnswerCheck func(op string, body []byte, r *Response) error
