package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/paygate/gateway/transport/acquirer/reconcile"
)

// gatewayctl reconcile --report FILE: POST /admin/v1/reconcile with the
// acquirer's settlement report; exit 1 when anything does not match.

func init() {
	register("reconcile", "compare the acquirer's settlement report with the gateway's ledger (admin API)", runReconcile)
}

func runReconcile(args []string) int { return reconcileCmd(args, os.Stdout, os.Stderr) }

func reconcileCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatewayctl reconcile", flag.ContinueOnError)
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member")
	token := fs.String("admin-token", "", "admin bearer token (default $GATEWAY_ADMIN_TOKEN)")
	report := fs.String("report", "", "the acquirer's settlement report (CSV)")
	asJSON := fs.Bool("json", false, "print the JSON answer")
	host := fs.String("acquirer-addr", "", "compare with the orders routed to this acquirer host only (HOST:PORT of a MID's host, or default)")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if *token == "" {
		*token = os.Getenv("GATEWAY_ADMIN_TOKEN")
	}
	if *report == "" || *token == "" {
		fmt.Fprintln(stderr, "gatewayctl reconcile: --report and --admin-token (or GATEWAY_ADMIN_TOKEN) are required")
		return 2
	}
	f, err := os.Open(*report)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl reconcile:", err)
		return 2
	}
	defer f.Close()
	base, err := memberURL(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl reconcile:", err)
		return 2
	}
	path := "/admin/v1/reconcile"
	if *host != "" {
		path += "?acquirer_addr=" + url.QueryEscape(*host)
	}
	req, err := http.NewRequest("POST", base+path, f)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl reconcile:", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	req.Header.Set("Content-Type", "text/csv")
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl reconcile:", err)
		return 2
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		fmt.Fprintln(stderr, "gatewayctl reconcile:", answerError(resp.StatusCode, data))
		return 2
	}
	var res reconcile.Result
	if err := json.Unmarshal(data, &res); err != nil {
		fmt.Fprintln(stderr, "gatewayctl reconcile: answer:", err)
		return 2
	}
	if *asJSON {
		stdout.Write(data)
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintf(stdout, "dates %v: %d matched, %d missing at the acquirer, %d missing at the gateway, %d mismatched\n",
			res.Dates, res.Matched, len(res.MissingAtAcquirer), len(res.MissingAtGateway), len(res.Mismatches))
		for _, e := range res.MissingAtAcquirer {
			fmt.Fprintf(stdout, "missing at the acquirer: %s %s %d %s (order %s)\n", e.Type, e.RRN, e.Amount, e.Currency, e.OrderID)
		}
		for _, e := range res.MissingAtGateway {
			fmt.Fprintf(stdout, "missing at the gateway: %s %s %d %s\n", e.Type, e.RRN, e.Amount, e.Currency)
		}
		for _, m := range res.Mismatches {
			fmt.Fprintf(stdout, "mismatch: %s %s acquirer %d %s, gateway %d %s\n", m.Acquirer.Type, m.Acquirer.RRN,
				m.Acquirer.Amount, m.Acquirer.Currency, m.Gateway.Amount, m.Gateway.Currency)
		}
	}
	if !res.Clean() {
		return 1
	}
	return 0
}
