package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"
)

// gatewayctl merchants rotate-keys: POST /admin/v1/merchants/{id}/rotate-keys.

func init() {
	register("merchants", "rotate a merchant's API or webhook keys (admin API)", runMerchants)
}

const merchantsUsage = `usage:
  gatewayctl merchants rotate-keys --merchant-id ID --pair api|webhook [--overlap DURATION] [--addr HOST:PORT] [--admin-token T]

Prints the new pair as JSON (the secret is shown this once). For the api
pair, the replaced key still signs requests for --overlap (e.g. 24h;
default 0: refused at once) and is refused with 401 1.01 after; a webhook
pair signs every notification sent after the rotation, with no overlap.
`

func runMerchants(args []string) int { return merchantsCmd(args, os.Stdout, os.Stderr) }

func merchantsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rotate-keys" {
		fmt.Fprint(stderr, merchantsUsage)
		return 2
	}
	fs := flag.NewFlagSet("gatewayctl merchants rotate-keys", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, merchantsUsage) }
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member")
	token := fs.String("admin-token", "", "admin bearer token (default $GATEWAY_ADMIN_TOKEN)")
	id := fs.String("merchant-id", "", "merchant whose keys to rotate")
	pair := fs.String("pair", "", "api or webhook")
	overlap := fs.Duration("overlap", 0, "how long the replaced api pair still signs requests (whole seconds)")
	if !parseFlags(fs, args[1:], stderr) {
		return 2
	}
	switch {
	case *id == "" || (*pair != "api" && *pair != "webhook"):
		fmt.Fprintln(stderr, "gatewayctl merchants rotate-keys: --merchant-id and --pair api|webhook are required")
		return 2
	case *overlap < 0 || *overlap%time.Second != 0:
		fmt.Fprintln(stderr, "gatewayctl merchants rotate-keys: --overlap must be whole seconds, not negative")
		return 2
	}
	c := adminFor("gatewayctl merchants rotate-keys", *addr, *token, stderr)
	if c == nil {
		return 2
	}
	data, err := c.do("POST", "/admin/v1/merchants/"+url.PathEscape(*id)+"/rotate-keys",
		map[string]any{"pair": *pair, "overlap_seconds": int64(*overlap / time.Second)})
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl merchants rotate-keys:", err)
		return 1
	}
	var buf bytes.Buffer
	if json.Indent(&buf, data, "", "  ") == nil {
		data = buf.Bytes()
	}
	fmt.Fprintln(stdout, string(data))
	return 0
}
