package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
)

// gatewayctl mids add|list: POST and GET /admin/v1/mids (processing MIDs,
// contract 12).

func init() {
	register("mids", "register and list processing MIDs and their acquirer hosts (admin API)", runMIDs)
}

const midsUsage = `usage:
  gatewayctl mids add --mid MID --merchant-id ID --acquirer-addr HOST:PORT --currencies USD,EUR [--addr HOST:PORT] [--admin-token T]
  gatewayctl mids list [--merchant-id ID] [--json] [--addr HOST:PORT] [--admin-token T]

add registers a MID through the cluster's log: from then on the merchant's
new orders must name one of its MIDs (processing_mid) in a currency it
accepts, and each MID's orders go to its acquirer host. A MID cannot be
changed; adding the same registration again is harmless. The admin token
may come from GATEWAY_ADMIN_TOKEN instead of the command line.
`

func runMIDs(args []string) int { return midsCmd(args, os.Stdout, os.Stderr) }

func midsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "list") {
		fmt.Fprint(stderr, midsUsage)
		return 2
	}
	name := "gatewayctl mids " + args[0]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, midsUsage) }
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member")
	token := fs.String("admin-token", "", "admin bearer token (default $GATEWAY_ADMIN_TOKEN)")
	merchant := fs.String("merchant-id", "", "the MID's merchant (list: only this merchant's)")
	mid := fs.String("mid", "", "the MID (ISO 8583 field 42: up to 15 letters, digits, '-', '_', '.')")
	acqAddr := fs.String("acquirer-addr", "", "the acquirer host serving the MID, host:port")
	currencies := fs.String("currencies", "", "ISO 4217 codes the MID accepts, comma-separated")
	asJSON := fs.Bool("json", false, "list: print the answer as JSON")
	if !parseFlags(fs, args[1:], stderr) {
		return 2
	}
	if args[0] == "add" && (*mid == "" || *merchant == "" || *acqAddr == "" || *currencies == "") {
		fmt.Fprintln(stderr, name+": --mid, --merchant-id, --acquirer-addr and --currencies are required")
		return 2
	}
	c := adminFor(name, *addr, *token, stderr)
	if c == nil {
		return 2
	}
	var data []byte
	var err error
	if args[0] == "add" {
		data, err = c.do("POST", "/admin/v1/mids", map[string]any{"mid": *mid, "merchant_id": *merchant,
			"acquirer_addr": *acqAddr, "currencies": strings.Split(*currencies, ",")})
	} else {
		path := "/admin/v1/mids"
		if *merchant != "" {
			path += "?merchant_id=" + url.QueryEscape(*merchant)
		}
		data, err = c.do("GET", path, nil)
	}
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	var list struct {
		MIDs []midLine `json:"mids"`
	}
	if args[0] == "add" {
		var one midLine
		err = json.Unmarshal(data, &one)
		list.MIDs = []midLine{one}
	} else if !*asJSON {
		err = json.Unmarshal(data, &list)
	}
	if err != nil || *asJSON {
		fmt.Fprintln(stdout, string(data)) // as it came
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MID\tMERCHANT\tACQUIRER\tCURRENCIES\tREGISTERED")
	for _, m := range list.MIDs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MID, m.MerchantID, m.AcquirerAddr, strings.Join(m.Currencies, ","), m.RegisteredAt)
	}
	tw.Flush()
	return 0
}

type midLine struct {
	MID          string   `json:"mid"`
	MerchantID   string   `json:"merchant_id"`
	AcquirerAddr string   `json:"acquirer_addr"`
	Currencies   []string `json:"currencies"`
	RegisteredAt string   `json:"registered_at"`
}
