// Package bench is the gateway's load-testing harness: it drives a running
// node (or a cluster it starts itself) with one workload at a fixed
// concurrency (closed loop) or a fixed arrival rate (open loop), records the
// latency of every operation in an HdrHistogram and reports throughput,
// percentiles and errors as a table and as JSON. cmd/gatewaybench is its CLI;
// README.md beside this file says how to read the numbers.
//
// Load only ever goes to loopback addresses: Config.Validate refuses any other
// target, and the webhook receiver listens on 127.0.0.1.
package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/internal/netaddr"
)

// Workload names.
const (
	WorkloadCharge    = "charge"
	WorkloadLifecycle = "lifecycle"
	WorkloadStatus    = "status"
	WorkloadMixed     = "mixed"
	WorkloadCeiling   = "ceiling"
	WorkloadWebhooks  = "webhooks"
	WorkloadSearch    = "search"
)

// Workloads lists every workload name, in the order the usage text gives them.
var Workloads = []string{WorkloadCharge, WorkloadLifecycle, WorkloadStatus, WorkloadMixed, WorkloadCeiling, WorkloadWebhooks, WorkloadSearch}

// Bounds of the configuration. Each is a hard limit that Validate enforces.
const (
	concurrencyMax = 10_000
	durationMax    = 24 * time.Hour
	warmupMax      = time.Hour
	rateMax        = 1_000_000 // arrivals per second
	rateMin        = 0.01      // one arrival every 100 s: slower is a mistake
	queueMax       = 1_000_000 // open-loop arrivals waiting for a worker
	ordersMax      = 1_000_000 // status pool size
	timeoutMax     = 60 * time.Second
	webhookWaitMax = 10 * time.Minute
)

// Config is one run. Zero values of the optional fields take the defaults
// that Defaults documents.
type Config struct {
	// Targets are node base addresses (http://127.0.0.1:PORT); worker i sends
	// to Targets[i % len(Targets)]. Each must be a loopback address.
	Targets []string
	// MerchantKey and MerchantSecret are the merchant's API key pair; every
	// workload but ceiling needs them.
	MerchantKey    string
	MerchantSecret string
	// WebhookKey and WebhookSecret, when set, make the webhook receiver verify
	// the notifications' merchant and signature headers.
	WebhookKey    string
	WebhookSecret string

	Workload    string
	Concurrency int           // closed loop: workers; open loop: the bound on requests in flight
	Duration    time.Duration // measured window
	Warmup      time.Duration // load before the window that is not recorded
	Rate        float64       // arrivals per second; 0 means closed loop
	Queue       int           // open loop: arrivals that may wait for a free worker before new ones are dropped
	Mix         Mix           // mixed workload weights
	Orders      int           // status, mixed and search: size of the order pool made before the window
	// PoolStall ends the pool's creation when no order of it has been
	// acknowledged for that long (DefaultPoolStall). A pool of a million
	// orders takes minutes on a small machine, so it is the absence of
	// progress that is bounded, not the whole fill.
	PoolStall time.Duration
	// PoolFile, when set, is the pool instead: order ids, one per line, of
	// orders that already exist (e.g. from RecordOrders), so reads can
	// target a large, old, uncached population.
	PoolFile string
	// RecordOrders, when set, receives the id of every acknowledged charge,
	// the pool's included.
	RecordOrders string
	Requests     int64         // stop after this many measured iterations; 0 means the duration alone bounds the run
	Timeout      time.Duration // per request; also bounds the lifecycle's wait for authorisation
	WebhookWait  time.Duration // webhooks: how long after the window to wait for outstanding notifications

	// Nodes, when set, are gateway processes on this machine whose CPU time
	// the report counts with the harness's own (Linux): the CLI sets them
	// for the nodes --spawn starts, and from --node-pids.
	Nodes []NodeProcess
	// ProfileDir, when set, receives a CPU and an allocation profile of
	// every node in Nodes with a PprofAddr, taken over the window
	// (nodeprofile.go); the report says where each node's CPU went.
	ProfileDir string

	// Progress, when set, receives a one-line progress display once a second
	// (carriage return, no newline); the CLI sets it only when stdout is a terminal.
	Progress io.Writer
	// Log receives phase messages (pool creation, waiting for notifications). Nil discards them.
	Log io.Writer
}

// Defaults of the optional fields.
const (
	DefaultConcurrency = 16
	DefaultDuration    = 10 * time.Second
	DefaultOrders      = 500
	DefaultPoolStall   = 2 * time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultWebhookWait = 10 * time.Second
	DefaultMix         = "charge=50,status=40,lifecycle=10"
	// The default open-loop queue holds a second of arrivals, and at least
	// this many per worker: a stall shorter than that is measured in full
	// (each waiting arrival carries its wait) instead of being dropped.
	queuePerWorker = 10
)

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Orders == 0 {
		c.Orders = DefaultOrders
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PoolStall == 0 {
		c.PoolStall = DefaultPoolStall
	}
	if c.WebhookWait == 0 {
		c.WebhookWait = DefaultWebhookWait
	}
	if c.Queue == 0 {
		c.Queue = min(max(queuePerWorker*c.Concurrency, int(math.Ceil(c.Rate))), queueMax)
	}
	if c.Workload == WorkloadMixed && len(c.Mix) == 0 {
		c.Mix, _ = ParseMix(DefaultMix)
	}
	return c
}

// Validate reports the first problem with the configuration, defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Targets) == 0 {
		return errors.New("no target")
	}
	for _, t := range c.Targets {
		if _, _, err := ParseTarget(t); err != nil {
			return err
		}
	}
	if !knownWorkload(c.Workload) {
		return fmt.Errorf("unknown workload %q (one of %s)", c.Workload, strings.Join(Workloads, ", "))
	}
	if c.Workload != WorkloadCeiling && (c.MerchantKey == "" || c.MerchantSecret == "") {
		return fmt.Errorf("workload %s needs --merchant-key and --merchant-secret", c.Workload)
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > concurrencyMax:
		return fmt.Errorf("concurrency %d outside 1..%d", c.Concurrency, concurrencyMax)
	case c.Duration <= 0 || c.Duration > durationMax:
		return fmt.Errorf("duration %s outside (0, %s]", c.Duration, durationMax)
	case c.Warmup < 0 || c.Warmup > warmupMax:
		return fmt.Errorf("warmup %s outside [0, %s]", c.Warmup, warmupMax)
	case math.IsNaN(c.Rate) || c.Rate < 0 || c.Rate > rateMax || (c.Rate > 0 && c.Rate < rateMin):
		return fmt.Errorf("rate %g outside [%g, %d] (0 = closed loop)", c.Rate, rateMin, rateMax)
	case c.Queue < 0 || c.Queue > queueMax:
		return fmt.Errorf("queue %d outside [0, %d]", c.Queue, queueMax)
	case c.Orders < 1 || c.Orders > ordersMax:
		return fmt.Errorf("orders %d outside 1..%d", c.Orders, ordersMax)
	case c.Requests < 0:
		return fmt.Errorf("requests %d is negative", c.Requests)
	case c.Timeout <= 0 || c.Timeout > timeoutMax:
		return fmt.Errorf("timeout %s outside (0, %s]", c.Timeout, timeoutMax)
	case c.PoolStall < 0:
		return fmt.Errorf("pool stall %s is negative", c.PoolStall)
	case c.WebhookWait < 0 || c.WebhookWait > webhookWaitMax:
		return fmt.Errorf("webhook wait %s outside [0, %s]", c.WebhookWait, webhookWaitMax)
	}
	if c.Workload == WorkloadMixed {
		if err := c.Mix.validate(); err != nil {
			return err
		}
	}
	return nil
}

func knownWorkload(w string) bool {
	for _, k := range Workloads {
		if k == w {
			return true
		}
	}
	return false
}

// ParseTarget checks that raw is an http address on a loopback host and
// returns its normalised base (scheme://host:port, no trailing slash and no
// /api/v3 suffix) and the host:port to dial.
func ParseTarget(raw string) (base, hostPort string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("target %q: %v", raw, err)
	}
	if u.Scheme != "http" {
		return "", "", fmt.Errorf("target %q: only http:// targets are supported", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	if !netaddr.LoopbackHost(host) {
		return "", "", fmt.Errorf("target %q: load only goes to loopback addresses (127.0.0.0/8, ::1, localhost)", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("target %q: give only scheme, host and port", raw)
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	if path != "" {
		return "", "", fmt.Errorf("target %q: give the node's base address, without a path", raw)
	}
	hostPort = net.JoinHostPort(host, port)
	return "http://" + hostPort, hostPort, nil
}

// Mix is the mixed workload's weights, one entry per operation kind.
type Mix []MixEntry

// MixEntry is one weighted kind of the mixed workload.
type MixEntry struct {
	Name   string // charge, status or lifecycle
	Weight int
}

// mixKinds are the kinds the mixed workload can draw.
var mixKinds = []string{WorkloadCharge, WorkloadStatus, WorkloadLifecycle}

// ParseMix reads "charge=50,status=40,lifecycle=10".
func ParseMix(s string) (Mix, error) {
	var m Mix
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("mix %q: want name=weight", part)
		}
		name = strings.TrimSpace(name)
		weight, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || weight < 0 {
			return nil, fmt.Errorf("mix %q: weight must be a non-negative integer", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("mix: %s given twice", name)
		}
		seen[name] = true
		m = append(m, MixEntry{Name: name, Weight: weight})
	}
	return m, m.validate()
}

func (m Mix) validate() error {
	total := 0
	for _, e := range m {
		known := false
		for _, k := range mixKinds {
			known = known || k == e.Name
		}
		if !known {
			return fmt.Errorf("mix: unknown kind %q (one of %s)", e.Name, strings.Join(mixKinds, ", "))
		}
		if e.Weight < 0 || e.Weight > 1_000_000 {
			return fmt.Errorf("mix: weight of %s outside 0..1000000", e.Name)
		}
		total += e.Weight
	}
	if total == 0 {
		return errors.New("mix: weights sum to zero")
	}
	return nil
}

// String is the canonical "name=weight,..." form, sorted by name.
func (m Mix) String() string {
	parts := make([]string, 0, len(m))
	for _, e := range m {
		parts = append(parts, e.Name+"="+strconv.Itoa(e.Weight))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (m Mix) has(kind string) bool {
	for _, e := range m {
		if e.Name == kind && e.Weight > 0 {
			return true
		}
	}
	return false
}
