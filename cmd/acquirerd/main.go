// Command acquirerd runs the sandbox acquirer host (contract section 12): an
// ISO 8583 server on --listen that decides by the test cards of contract
// section 7 and keeps a durable ledger in --data-dir, and an HTTP side on
// --admin-addr with the daily settlement report and runtime faults.
//
//	acquirerd --listen 127.0.0.1:8583 --admin-addr 127.0.0.1:8584 --data-dir ./acquirer-data
//	gatewayd --dev --acquirer-addr 127.0.0.1:8583
//
// Off the machine, the listener speaks TLS (--tls-cert-file, --tls-key-file,
// and --client-ca-file to ask every client for a certificate):
//
//	acquirerd --listen 10.0.0.5:8583 --tls-cert-file acq.crt --tls-key-file acq.key --client-ca-file ca.crt ...
//	gatewayd --acquirer-addr 10.0.0.5:8583 --acquirer-ca-file ca.crt --acquirer-cert-file node1.crt --acquirer-key-file node1.key ...
//	curl '127.0.0.1:8584/settlement-report?date=2026-11-28'
//	curl -d '{"latency_ms":200,"drop_answers":0.1}' 127.0.0.1:8584/faults
//
// The HTTP side needs --admin-token (or ACQUIRERD_ADMIN_TOKEN) unless it
// listens on loopback. docs/acquirer.md describes the protocol and the
// routine. SIGTERM or
// SIGINT stops it; the ledger is fsynced before every answer, so a kill
// loses nothing that was answered.
package main

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paygate/gateway/internal/netaddr"
	"github.com/paygate/gateway/transport/acquirer/host"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("acquirerd", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8583", "ISO 8583 listener (TCP, 2-byte length-prefixed messages)")
	adminAddr := fs.String("admin-addr", "127.0.0.1:8584", "HTTP: settlement report and faults (no authentication: keep it private)")
	dataDir := fs.String("data-dir", "./acquirer-data", "the ledger, one file per UTC day")
	adminToken := fs.String("admin-token", "", "bearer token the HTTP side requires (required unless --admin-addr is loopback); also ACQUIRERD_ADMIN_TOKEN")
	tlsCert := fs.String("tls-cert-file", "", "the ISO 8583 listener's TLS certificate (PEM); with --tls-key-file, the listener speaks TLS only")
	tlsKey := fs.String("tls-key-file", "", "the key of --tls-cert-file (PEM, mode 600)")
	clientCA := fs.String("client-ca-file", "", "mutual TLS: refuse a client whose certificate does not chain to a CA in this file (needs --tls-cert-file)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "acquirerd: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *adminToken == "" {
		*adminToken = os.Getenv("ACQUIRERD_ADMIN_TOKEN") // kept off command lines that tools show
	}
	if *adminToken == "" && !netaddr.Loopback(*adminAddr) {
		fmt.Fprintf(os.Stderr, "acquirerd: --admin-addr %s may be reached from other machines: give --admin-token (or ACQUIRERD_ADMIN_TOKEN), or listen on loopback\n", *adminAddr)
		return 2
	}
	if (*tlsCert == "") != (*tlsKey == "") || (*clientCA != "" && *tlsCert == "") {
		fmt.Fprintln(os.Stderr, "acquirerd: --tls-cert-file and --tls-key-file go together, and --client-ca-file needs them")
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "acquirerd: --log-level:", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	h, err := host.Open(host.Config{DataDir: *dataDir, Logger: logger})
	if err != nil {
		logger.Error("acquirerd: open", "error", err)
		return 1
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Error("acquirerd: listen", "error", err)
		return 1
	}
	if *tlsCert != "" {
		cfg, err := host.ServerTLS(*tlsCert, *tlsKey, *clientCA)
		if err != nil {
			logger.Error("acquirerd: TLS", "error", err)
			return 1
		}
		ln = tls.NewListener(ln, cfg)
	}
	adminLn, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		logger.Error("acquirerd: admin listen", "error", err)
		return 1
	}
	if *tlsCert == "" && !netaddr.Loopback(*listen) {
		logger.Warn("acquirerd: the ISO 8583 listener is plain TCP: card numbers cross the network in clear and anyone who reaches it is served; give --tls-cert-file and --tls-key-file (and --client-ca-file)")
	}
	admin := &http.Server{Handler: requireToken(*adminToken, h.AdminHandler()), ReadHeaderTimeout: 10 * time.Second}
	go admin.Serve(adminLn)
	served := make(chan error, 1)
	go func() { served <- h.Serve(ln) }()
	logger.Info("acquirerd listening", "listen", ln.Addr().String(), "admin_addr", adminLn.Addr().String(), "data_dir", *dataDir,
		"tls", *tlsCert != "", "mutual_tls", *clientCA != "")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-stop:
		logger.Info("acquirerd stopping", "signal", sig.String())
	case err := <-served:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			logger.Error("acquirerd: serve", "error", err)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin.Shutdown(ctx)
	h.Close()
	return 0
}

// requireToken refuses requests without "Authorization: Bearer <token>"
// (nothing is required when token is empty: a loopback admin address).
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
