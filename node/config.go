// Package node assembles a gateway node: store, raft, actors, front end and
// the leader-only background work, with one Start and one Shutdown.
package node

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/internal/netaddr"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/operator"
)

// Config is a node's configuration (contract section 10).
type Config struct {
	HTTPAddr string
	// AdvertiseHTTPAddr is the address the other nodes reach this one's
	// HTTP API on (default: HTTPAddr); it is what the member record holds.
	AdvertiseHTTPAddr string
	DataDir           string
	NodeID            string
	RaftAddr          string
	// AdvertiseRaftAddr is the cluster port's address the others dial
	// (default RaftAddr): what raft records, and what the node's
	// certificate names. A node behind NAT or a TCP proxy needs it.
	AdvertiseRaftAddr string
	Join              string
	// JoinHTTPS: --join was given as https://, the member serves TLS.
	JoinHTTPS bool
	// JoinToken lets a new node obtain its certificate (docs/security.md).
	JoinToken             string
	AdminToken            string
	Dev                   bool
	FormURL               string
	FormTTL               time.Duration
	VaultKeyFile          string
	VaultPreviousKeyFile  string // opens records sealed before a vault key rotation
	AllowPrivateCallbacks bool
	WebhookRetryDelays    []time.Duration
	WebhookRetention      time.Duration // delivered notifications (failed ones stay); 0 = for ever
	SettleDelayUnit       time.Duration
	AcquirerLatency       time.Duration // the in-process sandbox host's answer delay
	AcquirerAddr          string        // the acquirer host's ISO 8583 address; "" = the sandbox host in-process
	AcquirerTimeout       time.Duration // bounds one acquirer answer
	// The acquirer link's TLS (docs/acquirer.md, "Securing the link"): the
	// CA the host's certificate chains to, and the node's client
	// certificate for a host that asks for one; or plain TCP to a host off
	// this machine, only when the operator says so.
	AcquirerCAFile       string
	AcquirerCertFile     string
	AcquirerKeyFile      string
	InsecureAcquirerLink bool

	// Wallet flags (contract section 10).
	WalletAMerchantID        string
	WalletAProcessingKeyFile string
	WalletARootCertFile      string
	WalletBRecipientID       string
	WalletBPrivateKeyFile    string
	WalletBRootKeysFile      string

	// Backups (contract section 14, docs/operations.md).
	RestoreFile    string        // --restore: seed an empty data dir from this backup
	BackupDir      string        // scheduled backups go here ("" = none)
	BackupInterval time.Duration // between scheduled backups
	BackupKeep     int           // scheduled backups kept
	// Cluster links (contract section 11): the operator's certificates, or
	// none (<data-dir>/tls), or plain TCP on a loopback-only cluster.
	ClusterCAFile        string
	NodeCertFile         string
	NodeKeyFile          string
	InsecureClusterLinks bool
	// The public edge: the HTTP listener's certificate and key (TLS when
	// set), reloaded when the files change or on SIGHUP.
	HTTPTLSCertFile string
	HTTPTLSKeyFile  string
	// PprofAddr serves net/http/pprof (loopback only; "" off).
	PprofAddr string
	// OperatorIdleTimeout ends a back-office session unused for that long
	// (--operator-idle-timeout: from a minute to the session's 8-hour
	// lifetime; 0, in a Config not made by Defaults: the default, 15m).
	OperatorIdleTimeout time.Duration

	// Tuning knobs that are not flags of the contract.
	RaftLogDir        string        // raft log; "" = DataDir/raft/wal
	TokenTTL          time.Duration // payment token lifetime
	HeartbeatTimeout  time.Duration // raft; 0 = default
	ElectionTimeout   time.Duration // raft; 0 = default
	SnapshotThreshold uint64        // raft log entries between snapshots; 0 = default
	SnapshotInterval  time.Duration // how often raft checks the threshold; 0 = default
	SnapshotRateMiB   int64         // MiB/s a snapshot is written at; 0 = unbounded
	WALSegmentBytes   int           // raft-wal segment size; 0 = 64 MiB
	// CacheSizeMiB is Pebble's block cache for blocks (--cache-size-mib;
	// the memtables' reservation comes on top): what searches deep in the
	// history read from memory instead of the files.
	CacheSizeMiB int64
	// HistoryCacheMiB is the order history cache (--history-cache-mib; 0:
	// none): stored orders kept in memory outside the Go heap for searches
	// and status reads deep in the history (persistence/history.go).
	HistoryCacheMiB int64

	// acquirer, set only by this package's tests, replaces the acquirer
	// link (and the in-process host) with a function call: the A/B
	// benchmark of the link's cost (charge_bench_test.go).
	acquirer actors.Acquirer
}

// DefaultAcquirerTimeout bounds one acquirer answer (contract section 12).
const DefaultAcquirerTimeout = 10 * time.Second

// DevAdminToken is the admin token --dev sets when none is given.
const DevAdminToken = "dev-admin-token"

// DevMerchantID is the sandbox merchant --dev creates once.
const DevMerchantID = "mer_dev"

// DefaultRetryDelays are the notification retry offsets (contract section 6).
var DefaultRetryDelays = []time.Duration{
	15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
	4 * time.Hour, 8 * time.Hour, 16 * time.Hour, 24 * time.Hour,
}

// Defaults returns the contract's defaults.
func Defaults() Config {
	return Config{
		HTTPAddr:           "127.0.0.1:8080",
		DataDir:            "./data",
		NodeID:             "node1",
		RaftAddr:           "127.0.0.1:7000",
		FormTTL:            30 * time.Minute,
		WebhookRetryDelays: DefaultRetryDelays,
		// A finished notification is ~1 KB with its body: kept for ever,
		// the store and its snapshots would grow with every status change
		// (docs/webhooks.md, "How long they are kept").
		WebhookRetention: 30 * 24 * time.Hour,
		SettleDelayUnit:  time.Hour,
		AcquirerTimeout:  DefaultAcquirerTimeout,
		TokenTTL:         365 * 24 * time.Hour,
		// A snapshot at full disk speed stalls the raft log's fsyncs and
		// Pebble's flushes; at 32 MiB/s a million orders (1.4 GB) take 45 s
		// in the background (docs/performance.md).
		SnapshotRateMiB: 32,
		CacheSizeMiB:    persistence.DefaultBlockCacheBytes >> 20,
		HistoryCacheMiB: persistence.DefaultHistoryCacheBytes >> 20,
		// PCI DSS v4.0 8.2.8: re-authentication after 15 minutes idle.
		OperatorIdleTimeout: operator.SessionIdleTimeout,
	}
}

// ParseDelays parses a comma-separated list of increasing durations.
func ParseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("retry delay %q: %w", part, err)
		}
		if d <= 0 || (len(out) > 0 && d <= out[len(out)-1]) {
			return nil, errors.New("retry delays must be positive and increasing (offsets from the first attempt)")
		}
		out = append(out, d)
	}
	return out, nil
}

// Validate checks the configuration and fills what --dev implies.
func (c *Config) Validate() error {
	if c.Dev {
		if c.AdminToken == "" {
			// The development token is printed and documented: on an
			// address other machines reach, anyone could create merchants.
			if !netaddr.Loopback(c.HTTPAddr) {
				return fmt.Errorf("--dev on --http-addr %s, which other machines may reach, would open the admin API with the well-known development token: give --admin-token, or listen on 127.0.0.1", c.HTTPAddr)
			}
			c.AdminToken = DevAdminToken
		}
		c.AllowPrivateCallbacks = true
	}
	if c.Join != "" {
		c.JoinHTTPS = strings.HasPrefix(c.Join, "https://")
		join, err := joinAddress(c.Join)
		if err != nil {
			return err
		}
		c.Join = join
	}
	if c.AdvertiseRaftAddr == "" {
		c.AdvertiseRaftAddr = c.RaftAddr
	} else if _, _, err := net.SplitHostPort(c.AdvertiseRaftAddr); err != nil || cluster.UnspecifiedHost(c.AdvertiseRaftAddr) {
		return fmt.Errorf("--advertise-raft-addr %q: want host:port of an address the other nodes reach this one's cluster port on", c.AdvertiseRaftAddr)
	}
	if err := c.checkSecurity(); err != nil {
		return err
	}
	if c.VaultKeyFile == "" && !c.Dev {
		return errors.New("--vault-key-file is required (or --dev for a development key)")
	}
	if c.SettleDelayUnit <= 0 {
		return errors.New("--settle-delay-unit must be positive")
	}
	if c.WebhookRetention < 0 {
		return errors.New("--webhook-retention must not be negative (0 keeps notifications for ever)")
	}
	if err := c.checkNotNegative(); err != nil {
		return err
	}
	if err := c.checkBackups(); err != nil {
		return err
	}
	if err := c.checkOperatorIdleTimeout(); err != nil {
		return err
	}
	if err := c.checkAcquirer(); err != nil {
		return err
	}
	if err := c.checkAdvertisedHTTP(); err != nil {
		return err
	}
	if c.FormURL == "" {
		c.FormURL = "http://" + c.AdvertiseHTTPAddr
	} else if u, err := url.Parse(c.FormURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--form-url %q: want the absolute http(s) address the forms are served at, e.g. https://pay.example.com", c.FormURL)
	}
	c.FormURL = strings.TrimRight(c.FormURL, "/")
	if c.TokenTTL <= 0 {
		c.TokenTTL = 365 * 24 * time.Hour
	}
	if len(c.WebhookRetryDelays) == 0 {
		c.WebhookRetryDelays = DefaultRetryDelays
	}
	return nil
}

// checkNotNegative refuses negative durations and sizes: each would
// otherwise be read as its default or as "off" without a word.
func (c *Config) checkNotNegative() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--form-ttl", c.FormTTL}, {"--acquirer-latency", c.AcquirerLatency},
		{"--raft-heartbeat-timeout", c.HeartbeatTimeout}, {"--raft-election-timeout", c.ElectionTimeout},
		{"--raft-snapshot-interval", c.SnapshotInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s must not be negative (0: the default)", d.flag)
		}
	}
	if c.SnapshotRateMiB < 0 {
		return errors.New("--raft-snapshot-rate-mib must not be negative (0: unbounded)")
	}
	if c.CacheSizeMiB < 0 {
		return errors.New("--cache-size-mib must not be negative (0: the default)")
	}
	if c.HistoryCacheMiB < 0 {
		return errors.New("--history-cache-mib must not be negative (0: none)")
	}
	if c.WALSegmentBytes < 0 {
		return errors.New("--raft-wal-segment-bytes must not be negative (0: 64 MiB)")
	}
	return nil
}

// checkOperatorIdleTimeout checks --operator-idle-timeout: at least a
// minute (a shorter one would renew sessions through the log more often
// than every few seconds), at most the session's lifetime (longer would be
// none).
func (c *Config) checkOperatorIdleTimeout() error {
	if c.OperatorIdleTimeout == 0 {
		c.OperatorIdleTimeout = operator.SessionIdleTimeout
		return nil
	}
	if c.OperatorIdleTimeout < operator.MinSessionIdleTimeout || c.OperatorIdleTimeout > operator.SessionLifetime {
		return fmt.Errorf("--operator-idle-timeout %s: want from %s to %s (the session's lifetime); PCI DSS asks for 15m at most",
			c.OperatorIdleTimeout, operator.MinSessionIdleTimeout, operator.SessionLifetime)
	}
	return nil
}

// checkBackups checks --restore and the scheduled backups' flags.
func (c *Config) checkBackups() error {
	if c.RestoreFile != "" && c.Join != "" {
		return errors.New("--restore starts a new cluster from the backup; it cannot --join another (start the restored node first, then join the others to it)")
	}
	if c.BackupDir == "" {
		return nil
	}
	if c.BackupInterval <= 0 {
		return errors.New("--backup-dir needs a positive --backup-interval")
	}
	if c.BackupKeep < 1 {
		return errors.New("--backup-keep must be at least 1")
	}
	return nil
}

// checkAcquirer checks the acquirer link's flags (contract section 12).
func (c *Config) checkAcquirer() error {
	if c.AcquirerTimeout < 0 {
		return errors.New("--acquirer-timeout must be positive: it bounds one acquirer answer")
	}
	if c.AcquirerTimeout == 0 {
		c.AcquirerTimeout = DefaultAcquirerTimeout
	}
	if c.AcquirerAddr == "" {
		if c.AcquirerCAFile != "" || c.AcquirerCertFile != "" || c.AcquirerKeyFile != "" || c.InsecureAcquirerLink {
			return errors.New("--acquirer-ca-file, --acquirer-cert-file, --acquirer-key-file and --insecure-acquirer-link are for the link to --acquirer-addr (the in-process host needs none)")
		}
		return nil
	}
	if (c.AcquirerCertFile == "") != (c.AcquirerKeyFile == "") {
		return errors.New("--acquirer-cert-file and --acquirer-key-file go together")
	}
	if c.AcquirerCertFile != "" && c.AcquirerCAFile == "" {
		return errors.New("--acquirer-cert-file is the node's certificate on a TLS link: give --acquirer-ca-file too")
	}
	if c.InsecureAcquirerLink && c.AcquirerCAFile != "" {
		return errors.New("--insecure-acquirer-link turns the link's TLS off: it takes no --acquirer-ca-file")
	}
	if c.AcquirerCAFile == "" && !c.InsecureAcquirerLink && !netaddr.Loopback(c.AcquirerAddr) {
		return fmt.Errorf("--acquirer-addr %s is not on this machine, and the link would carry card numbers in clear: give --acquirer-ca-file (the CA of the host's TLS certificate), or --insecure-acquirer-link when something else encrypts the path", c.AcquirerAddr)
	}
	if c.AcquirerLatency != 0 {
		return errors.New("--acquirer-latency delays the in-process sandbox host only; with --acquirer-addr, set the host's latency (acquirerd: POST /faults)")
	}
	if _, port, err := net.SplitHostPort(c.AcquirerAddr); err != nil || port == "" {
		return fmt.Errorf("--acquirer-addr %q: want host:port of the acquirer host's ISO 8583 listener", c.AcquirerAddr)
	}
	return nil
}

// joinAddress accepts --join as host:port or as an http:// or https:// URL
// of a member (operators copy either from the docs or the cluster view) and
// returns host:port. Paths are refused rather than silently dropped.
func joinAddress(join string) (string, error) {
	addr := strings.TrimPrefix(strings.TrimPrefix(join, "http://"), "https://")
	addr = strings.TrimSuffix(addr, "/")
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.ContainsAny(addr, "/?#") {
		return "", fmt.Errorf("--join %q: want the HTTP address of a member, host:port, http://host:port or https://host:port", join)
	}
	return addr, nil
}

// checkSecurity checks the cluster-link and public-edge flags (contract
// section 11).
func (c *Config) checkSecurity() error {
	if c.InsecureClusterLinks {
		if !netaddr.Loopback(c.RaftAddr) || !netaddr.Loopback(c.AdvertiseRaftAddr) {
			return fmt.Errorf("--insecure-cluster-links is for a cluster whose every --raft-addr is a loopback address; %s is not: run with TLS (the default)", c.RaftAddr)
		}
		if c.ClusterCAFile != "" || c.NodeCertFile != "" || c.NodeKeyFile != "" || c.JoinToken != "" {
			return errors.New("--insecure-cluster-links turns TLS off: it takes no --cluster-ca-file, --node-cert-file, --node-key-file or --join-token")
		}
	}
	given := 0
	for _, f := range []string{c.ClusterCAFile, c.NodeCertFile, c.NodeKeyFile} {
		if f != "" {
			given++
		}
	}
	if given != 0 && given != 3 {
		return errors.New("--cluster-ca-file, --node-cert-file and --node-key-file go together: give all three, or none (the cluster then makes its own)")
	}
	if given == 3 && c.JoinToken != "" {
		return errors.New("--join-token is for a node without certificates: with --node-cert-file the node joins with its certificate alone")
	}
	if (c.HTTPTLSCertFile == "") != (c.HTTPTLSKeyFile == "") {
		return errors.New("--http-tls-cert-file and --http-tls-key-file go together")
	}
	if c.PprofAddr != "" && !netaddr.Loopback(c.PprofAddr) {
		return fmt.Errorf("--pprof-addr %s: profiles show the node's memory, card data included; listen on a loopback address (127.0.0.1:6060) and reach it through SSH", c.PprofAddr)
	}
	return nil
}

// checkAdvertisedHTTP fills AdvertiseHTTPAddr. Peers forward writes to the
// address a member records, so it must name this machine: an --http-addr
// that listens on every interface (0.0.0.0, ::, or no host) names none, and
// recorded as it is, every peer would forward to itself. A node that joins
// a cluster needs --advertise-http-addr then; a first node may start
// without one, and the leader refuses joins while it advertises no address
// (server.joinConflict).
func (c *Config) checkAdvertisedHTTP() error {
	if c.AdvertiseHTTPAddr == "" {
		c.AdvertiseHTTPAddr = c.HTTPAddr
		if c.Join != "" && cluster.UnspecifiedHost(c.HTTPAddr) {
			return fmt.Errorf("--http-addr %s listens on every interface and names no address the cluster can reach this node on: give --advertise-http-addr host:port", c.HTTPAddr)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.AdvertiseHTTPAddr); err != nil || cluster.UnspecifiedHost(c.AdvertiseHTTPAddr) {
		return fmt.Errorf("--advertise-http-addr %q: want host:port of an address the other nodes reach this one on", c.AdvertiseHTTPAddr)
	}
	return nil
}
