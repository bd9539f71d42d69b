// Command gatewayd runs a payment gateway node.
//
// Every flag can also be set by an environment variable GATEWAY_<NAME>
// (upper case, '-' as '_'); a flag on the command line wins.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/paygate/gateway/node"
	"github.com/paygate/gateway/transport/signature"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg := node.Defaults()
	fs := flag.NewFlagSet("gatewayd", flag.ContinueOnError)
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "merchant API, form, admin, health and metrics listener")
	fs.StringVar(&cfg.AdvertiseHTTPAddr, "advertise-http-addr", "", "host:port recorded as this node's HTTP API, shown by cluster status (default --http-addr; needed when that listens on 0.0.0.0)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "Pebble, Raft snapshots and (without --raft-log-dir) the Raft log")
	fs.StringVar(&cfg.RaftLogDir, "raft-log-dir", "", "Raft log, ideally on a device of its own (default <data-dir>/raft/wal)")
	fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "stable identity in the cluster")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "Raft traffic between nodes")
	fs.StringVar(&cfg.AdvertiseRaftAddr, "advertise-raft-addr", "", "host:port the other nodes reach this one's cluster port on (default --raft-addr)")
	fs.StringVar(&cfg.Join, "join", "", "HTTP address of any member whose cluster to join (host:port or http://host:port)")
	fs.StringVar(&cfg.JoinToken, "join-token", "", "join token of the cluster to --join (gatewayctl cluster join-token); prefer GATEWAY_JOIN_TOKEN, which ps does not show")
	fs.StringVar(&cfg.ClusterCAFile, "cluster-ca-file", "", "PEM CA of the cluster links (the operator's PKI; default: the cluster's own, in <data-dir>/tls)")
	fs.StringVar(&cfg.NodeCertFile, "node-cert-file", "", "PEM certificate of this node on the cluster links (with --cluster-ca-file)")
	fs.StringVar(&cfg.NodeKeyFile, "node-key-file", "", "PEM private key of --node-cert-file")
	fs.BoolVar(&cfg.InsecureClusterLinks, "insecure-cluster-links", false, "cluster links without TLS: only when every --raft-addr is a loopback address")
	fs.StringVar(&cfg.HTTPTLSCertFile, "http-tls-cert-file", "", "serve the HTTP listener over TLS with this PEM certificate (reloaded on SIGHUP or change)")
	fs.StringVar(&cfg.HTTPTLSKeyFile, "http-tls-key-file", "", "PEM private key of --http-tls-cert-file")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token of the admin API (empty: admin API off)")
	fs.BoolVar(&cfg.Dev, "dev", false, "development: sandbox merchant, dev admin token and vault key, private callbacks allowed")
	fs.StringVar(&cfg.FormURL, "form-url", "", "public address put into form_url and redirect_url (default http://<advertise-http-addr>)")
	fs.DurationVar(&cfg.FormTTL, "form-ttl", cfg.FormTTL, "lifetime of an unpaid payment form")
	fs.StringVar(&cfg.VaultKeyFile, "vault-key-file", "", "32-byte key-encryption key for card data (raw, hex or base64)")
	fs.StringVar(&cfg.VaultPreviousKeyFile, "vault-previous-key-file", "", "the vault key before a rotation: opens what it sealed; the node re-seals it under --vault-key-file (docs/security.md)")
	fs.BoolVar(&cfg.AllowPrivateCallbacks, "allow-private-callbacks", false, "permit loopback and private callback_url targets")
	delays := fs.String("webhook-retry-delays", "15m,30m,1h,2h,4h,8h,16h,24h", "notification retry offsets from the first attempt")
	fs.DurationVar(&cfg.WebhookRetention, "webhook-retention", cfg.WebhookRetention, "how long delivered notifications are kept; failed ones stay until redelivered (0: for ever)")
	fs.DurationVar(&cfg.SettleDelayUnit, "settle-delay-unit", cfg.SettleDelayUnit, "length of one settle.delay_hours hour")
	fs.DurationVar(&cfg.AcquirerLatency, "acquirer-latency", 0, "answer delay of the in-process sandbox acquirer host (not with --acquirer-addr)")
	fs.StringVar(&cfg.AcquirerAddr, "acquirer-addr", "", "acquirer host's ISO 8583 address, host:port (default: the sandbox host in-process on a loopback port)")
	fs.DurationVar(&cfg.AcquirerTimeout, "acquirer-timeout", cfg.AcquirerTimeout, "bounds one acquirer answer")
	fs.StringVar(&cfg.AcquirerCAFile, "acquirer-ca-file", "", "TLS to --acquirer-addr: the CA (PEM) the acquirer host's certificate chains to")
	fs.StringVar(&cfg.AcquirerCertFile, "acquirer-cert-file", "", "the node's client certificate (PEM) for an acquirer host that asks for one (mutual TLS)")
	fs.StringVar(&cfg.AcquirerKeyFile, "acquirer-key-file", "", "the key of --acquirer-cert-file (PEM, mode 600)")
	fs.BoolVar(&cfg.InsecureAcquirerLink, "insecure-acquirer-link", false, "plain TCP to an --acquirer-addr off this machine: card numbers in clear (only when something else encrypts the path)")
	fs.StringVar(&cfg.WalletAMerchantID, "walleta-merchant-id", "", "walleta-pay merchant identifier (KDF party V is its SHA-256)")
	fs.StringVar(&cfg.WalletAProcessingKeyFile, "walleta-processing-key-file", "", "walleta-pay processing private key(s), PEM")
	fs.StringVar(&cfg.WalletARootCertFile, "walleta-root-cert-file", "", "walleta-pay root certificate the signing chain must reach, PEM")
	fs.StringVar(&cfg.WalletBRecipientID, "walletb-recipient-id", "", "walletb-pay recipient id, e.g. gateway:<id>")
	fs.StringVar(&cfg.WalletBPrivateKeyFile, "walletb-private-key-file", "", "walletb-pay recipient private key, PEM EC P-256")
	fs.StringVar(&cfg.WalletBRootKeysFile, "walletb-root-keys-file", "", "walletb-pay root signing keys, the provider's JSON list")
	fs.StringVar(&cfg.RestoreFile, "restore", "", "start a new single-node cluster from this backup file (into an empty --data-dir; others then join it)")
	fs.StringVar(&cfg.BackupDir, "backup-dir", "", "write scheduled backups of this node's state here (off when empty)")
	fs.DurationVar(&cfg.BackupInterval, "backup-interval", time.Hour, "time between scheduled backups (with --backup-dir)")
	fs.IntVar(&cfg.BackupKeep, "backup-keep", 24, "scheduled backups kept in --backup-dir; older ones are deleted")
	fs.Int64Var(&cfg.CacheSizeMiB, "cache-size-mib", cfg.CacheSizeMiB, "MiB of Pebble's block cache for stored data, on top of the Go heap's limit (0: the default)")
	fs.Int64Var(&cfg.HistoryCacheMiB, "history-cache-mib", cfg.HistoryCacheMiB, "MiB of stored orders kept in memory for searches and status reads of old orders, outside the Go heap (0: none)")
	memLimit := fs.Int64("memory-limit-mib", 640, "soft limit of the Go heap in MiB (GOMEMLIMIT wins when set); Pebble's block cache and the history cache come on top")
	fs.DurationVar(&cfg.OperatorIdleTimeout, "operator-idle-timeout", cfg.OperatorIdleTimeout, "a back-office session unused for this long ends (1m to 8h; PCI DSS asks for 15m at most)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (off when empty; profiling only)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	// Raft tuning: hidden from -help, documented in docs/cluster.md.
	fs.Uint64Var(&cfg.SnapshotThreshold, "raft-snapshot-threshold", 0, "raft log entries between snapshots (0: 8192)")
	fs.DurationVar(&cfg.SnapshotInterval, "raft-snapshot-interval", 0, "how often raft checks the snapshot threshold (0: 2m)")
	fs.Int64Var(&cfg.SnapshotRateMiB, "raft-snapshot-rate-mib", cfg.SnapshotRateMiB, "MiB/s a snapshot is written at (0: unbounded)")
	fs.DurationVar(&cfg.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "raft heartbeat timeout (0: 1s)")
	fs.DurationVar(&cfg.ElectionTimeout, "raft-election-timeout", 0, "raft election timeout (0: 1s)")
	fs.IntVar(&cfg.WALSegmentBytes, "raft-wal-segment-bytes", 0, "raft log segment size (0: 64 MiB; compacted entries go with whole segments)")
	hideFlags(fs, "raft-snapshot-threshold", "raft-snapshot-interval", "raft-snapshot-rate-mib", "raft-heartbeat-timeout",
		"raft-election-timeout", "raft-wal-segment-bytes")

	if err := applyEnv(fs); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd:", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Parsing stops at the first word that is not a flag, and would drop
	// every flag after it (--dev true, a stray value): refuse it.
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gatewayd: unexpected argument %q: every flag after it would be ignored "+
			"(a boolean flag takes no separate value: --dev, or --dev=false)\n", fs.Arg(0))
		return 2
	}
	if *memLimit < 0 {
		fmt.Fprintln(os.Stderr, "gatewayd: --memory-limit-mib must not be negative (0: no limit)")
		return 2
	}
	if cfg.OperatorIdleTimeout == 0 {
		// 0 stands for the default in a node.Config made without
		// Defaults; given here, it would be taken for it without a word
		// (by an operator who meant "none").
		fmt.Fprintln(os.Stderr, "gatewayd: --operator-idle-timeout 0s: want from 1m0s to 8h0m0s (there is no turning it off)")
		return 2
	}
	var err error
	if cfg.WebhookRetryDelays, err = node.ParseDelays(*delays); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd: --webhook-retry-delays:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd: --log-level:", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && *memLimit > 0 {
		// Without a limit the heap grows to twice the live data before a
		// collection; with one, the collector works harder instead.
		// Pebble's block cache and the order history cache live outside
		// the heap: the limit is not for them.
		debug.SetMemoryLimit(*memLimit << 20)
		if _, set := os.LookupEnv("GOGC"); !set {
			// Collect less often while far below the limit: GC was ~10 %
			// of a charge's CPU at the default of 100.
			debug.SetGCPercent(200)
		}
	}
	n, err := node.Start(cfg, logger) // checks --pprof-addr is loopback
	if err != nil {
		logger.Error("start failed", "error", err)
		return 1
	}
	if cfg.PprofAddr != "" {
		go func() { logger.Info("pprof", "error", http.ListenAndServe(cfg.PprofAddr, nil)) }()
	}
	logger.Info("gatewayd listening", "http_addr", n.Addr(), "raft_addr", cfg.RaftAddr, "node_id", cfg.NodeID, "data_dir", cfg.DataDir)
	if cfg.Dev {
		printDevMerchant(n, n.Config())
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	code := 0
	select {
	case s := <-sig:
		logger.Info("draining", "signal", s.String())
	case err := <-n.ServeErr():
		logger.Error("http server stopped", "error", err)
		code = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		logger.Error("shutdown", "error", err)
		code = 1
	}
	logger.Info("stopped")
	return code
}

// hideFlags leaves tuning flags out of -help; they still parse.
func hideFlags(fs *flag.FlagSet, names ...string) {
	hidden := map[string]bool{}
	for _, n := range names {
		hidden[n] = true
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of gatewayd (each flag also GATEWAY_<NAME>):\n")
		visible := flag.NewFlagSet("gatewayd", flag.ContinueOnError)
		visible.SetOutput(fs.Output())
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				visible.Var(f.Value, f.Name, f.Usage)
			}
		})
		visible.PrintDefaults()
	}
}

// applyEnv sets each flag from GATEWAY_<NAME> when that variable is set.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "GATEWAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s: %w", name, serr)
			}
		}
	})
	return err
}

// printDevMerchant prints the sandbox merchant's keys and a signed curl.
func printDevMerchant(n *node.Node, cfg node.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := n.DevMerchant(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd:", err)
		return
	}
	body := `{"order_id":"order-1","amount":1020,"currency":"USD","order_description":"Test order","processing_mid":"sandbox","settle":{"delay_hours":24},"customer":{"user_id":"u1","email":"u1@example.com","ip_address":"127.0.0.1"},"payment_source":{"type":"card","card_number":"4111111111111111","card_holder_name":"Test User","card_exp_month":"12","card_exp_year":"2035","card_cvv":"123"}}`
	fmt.Printf(`
Sandbox merchant (development only)
  merchant_id         %s
  api public key      %s
  api secret key      %s
  webhook public key  %s
  webhook secret key  %s
  admin token         %s

Try a signed charge:
  curl -s http://%s/api/v3/charge \
    -H 'Content-Type: application/json' \
    -H 'merchant: %s' \
    -H 'signature: %s' \
    -d '%s'

`, m.ID, m.APIPublicKey, m.APISecret, m.WebhookPublicKey, m.WebhookSecret, cfg.AdminToken,
		n.Addr(), m.APIPublicKey, signature.Sign(m.APIPublicKey, m.APISecret, []byte(body)), body)
}
