package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"text/tabwriter"
	"time"
)

// gatewayctl merchants rotate-keys: POST /admin/v1/merchants/{id}/rotate-keys.

func init() {
	register("merchants", "merchants: create, list, rotate a merchant's API or webhook keys (admin API)", runMerchants)
}

const merchantsUsage = `usage:
  gatewayctl merchants create [--name NAME] [--rate-limit-rps N] [--json] [--addr HOST:PORT] [--admin-token T]
  gatewayctl merchants list   [--json] [--addr HOST:PORT] [--admin-token T]
  gatewayctl merchants rotate-keys --merchant-id ID --pair api|webhook [--overlap DURATION] [--addr HOST:PORT] [--admin-token T]

create prints the new merchant's id and both key pairs (the secrets are shown
this once); list shows every merchant with the public halves of its keys.

rotate-keys prints the new pair as JSON (the secret is shown this once). For the api
pair, the replaced key still signs requests for --overlap (e.g. 24h;
default 0: refused at once) and is refused with 401 1.01 after; a webhook
pair signs every notification sent after the rotation, with no overlap.
`

func runMerchants(args []string) int { return merchantsCmd(args, os.Stdout, os.Stderr) }

func merchantsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "create" || args[0] == "list") {
		return merchantsCreateOrList(args[0], args[1:], stdout, stderr)
	}
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
	printJSON(stdout, data)
	return 0
}

// merchantRow is a merchant as GET /admin/v1/merchants lists it.
type merchantRow struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	RateLimitRPS     int    `json:"rate_limit_rps"`
	APIPublicKey     string `json:"api_public_key"`
	WebhookPublicKey string `json:"webhook_public_key"`
	CreatedAt        string `json:"created_at"`
}

// merchantsCreateOrList is `merchants create` (POST /admin/v1/merchants)
// and `merchants list` (GET /admin/v1/merchants).
func merchantsCreateOrList(sub string, args []string, stdout, stderr io.Writer) int {
	name := "merchants " + sub
	fs := flag.NewFlagSet("gatewayctl "+name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, merchantsUsage) }
	af := newAdminFlags(fs)
	merchantName := fs.String("name", "", "the merchant's name (create)")
	rps := fs.Int("rate-limit-rps", 0, "requests per second allowed (create; 0: the node's default)")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	c, ok := af.client(name, stderr)
	if !ok {
		return 2
	}
	var data []byte
	var err error
	if sub == "create" {
		data, err = c.do("POST", "/admin/v1/merchants", map[string]any{"name": *merchantName, "rate_limit_rps": *rps})
	} else {
		data, err = c.do("GET", "/admin/v1/merchants", nil)
	}
	// The credentials of a new merchant are shown whole, once: JSON is
	// what a script stores them from.
	*af.asJSON = *af.asJSON || sub == "create"
	rows, code, done := answerRows[merchantRow](af, name, data, err, "merchants", stdout, stderr)
	if done {
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tRATE LIMIT\tAPI PUBLIC KEY\tWEBHOOK PUBLIC KEY\tCREATED")
	for _, m := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d/s\t%s\t%s\t%s\n", m.ID, dash(m.Name), m.RateLimitRPS, m.APIPublicKey, m.WebhookPublicKey, m.CreatedAt)
	}
	tw.Flush()
	return 0
}
