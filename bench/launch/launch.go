// Package launch is what starting gatewayd nodes takes, shared by the two
// things that start them: the load harness (bench's --spawn) and the
// end-to-end tests (node/nodetest). It builds the binary, picks free
// loopback ports, and makes the admin calls a new cluster needs: a join
// token for the nodes that join, a merchant to drive.
//
// It lives under bench/ because bench may import only the gateway's public
// API and its own packages; nodetest imports it from here. Like bench, it
// talks to nodes only over their HTTP API.
package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BuildGatewayd builds ./cmd/gatewayd of the module the working directory
// is in (found with `go env GOMOD`) into dir and returns the binary's path.
func BuildGatewayd(ctx context.Context, dir string) (string, error) {
	return Build(ctx, dir, "gatewayd")
}

// Build builds the module's ./cmd/<name> into dir and returns its path.
func Build(ctx context.Context, dir, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the gateway's repository or pass --gatewayd")
	}
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = filepath.Dir(gomod)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, msg)
	}
	return bin, nil
}

// FreePorts finds n free loopback ports. They are released before gatewayd
// binds them, so another process may take one in between: callers start a
// node again on fresh ports when it cannot bind. They are drawn at random
// below Linux's ephemeral range (32768 and up by default), not from the
// kernel's ":0": every outgoing connection of a busy test run takes an
// ephemeral port, and one of them took a port handed out here often enough
// to fail full runs ("address already in use").
func FreePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, errors.New("no free loopback port found in 20000-32767")
		}
		p := portFloor + rand.IntN(portCeil-portFloor)
		if handedOut.ports[p] {
			continue // this process may not have bound it yet
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		defer ln.Close()
		handedOut.ports[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// handedOut is every port this process was given, never given twice (a
// node restarted later binds its old ports again).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// The range FreePorts draws from: above the well-known and common service
// ports, below the ephemeral range.
const portFloor, portCeil = 20000, 32768

// Admin calls one node's admin API.
type Admin struct {
	BaseURL string // http://host:port or https://host:port
	Token   string
	Client  *http.Client
}

// Do sends an admin request and decodes a 2xx answer into out (may be
// nil). It returns the status; an answer that is not 2xx is not an error
// here, the caller decides (a 503 while no leader is known is retried).
func (a Admin) Do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, &HTTPError{Status: resp.StatusCode, Body: string(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// HTTPError is an admin answer that is not 2xx.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// JoinToken makes a join token (valid 1 h) for the nodes that join the
// node's cluster (docs/security.md).
func (a Admin) JoinToken(ctx context.Context) (string, error) {
	var out struct {
		JoinToken string `json:"join_token"`
	}
	if _, err := a.Do(ctx, http.MethodPost, "/admin/v1/cluster/join-token", nil, &out); err != nil {
		return "", fmt.Errorf("join token: %w", err)
	}
	return out.JoinToken, nil
}

// Merchant is the answer of POST /admin/v1/merchants.
type Merchant struct {
	ID      string  `json:"merchant_id"`
	API     KeyPair `json:"api"`
	Webhook KeyPair `json:"webhook"`
}

// KeyPair is a merchant's public and secret key.
type KeyPair struct {
	PublicKey string `json:"public_key"`
	SecretKey string `json:"secret_key"`
}

// CreateMerchant creates a merchant with that rate limit (requests/s).
func (a Admin) CreateMerchant(ctx context.Context, name string, rateLimitRPS int) (*Merchant, error) {
	body, err := json.Marshal(map[string]any{"name": name, "rate_limit_rps": rateLimitRPS})
	if err != nil {
		return nil, err
	}
	var m Merchant
	if _, err := a.Do(ctx, http.MethodPost, "/admin/v1/merchants", body, &m); err != nil {
		return nil, fmt.Errorf("create merchant: %w", err)
	}
	if m.API.PublicKey == "" || m.API.SecretKey == "" {
		return nil, errors.New("create merchant: answer has no api key pair")
	}
	return &m, nil
}
