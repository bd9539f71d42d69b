package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"text/tabwriter"
)

// gatewayctl webhooks list|resend: a merchant's deliveries and a delivery
// sent again (GET /admin/v1/webhooks, POST /admin/v1/webhooks/{id}/redeliver).

func init() {
	register("webhooks", "notifications: list an order's or merchant's deliveries, resend one (admin API)", func(args []string) int {
		return webhooksCmd(args, os.Stdout, os.Stderr)
	})
}

const webhooksUsage = `usage:
  gatewayctl webhooks list   --merchant-id ID [--order-id ID] [--json] [--addr A] [--admin-token T]
  gatewayctl webhooks resend --id NOTIFICATION_ID [--json] [--addr A] [--admin-token T]

resend starts the delivery again now, with a fresh retry schedule.
`

// deliveryRow is a delivery as the admin API shows it.
type deliveryRow struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	OrderStatus string `json:"order_status"`
	URL         string `json:"url"`
	State       string `json:"state"`
	CreatedAt   string `json:"created_at"`
	NextDueAt   string `json:"next_due_at"`
	Attempts    []struct {
		At       string `json:"at"`
		HTTPCode int    `json:"http_code"`
		Error    string `json:"error"`
	} `json:"attempts"`
}

func webhooksCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "resend") {
		fmt.Fprint(stderr, webhooksUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	name := "webhooks " + sub
	fs := flag.NewFlagSet("gatewayctl "+name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, webhooksUsage) }
	af := newAdminFlags(fs)
	merchant := fs.String("merchant-id", "", "the merchant (list)")
	orderID := fs.String("order-id", "", "one order's deliveries (list)")
	id := fs.String("id", "", "the delivery to send again (resend)")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if (sub == "list" && *merchant == "") || (sub == "resend" && *id == "") {
		fmt.Fprint(stderr, webhooksUsage)
		return 2
	}
	c, ok := af.client(name, stderr)
	if !ok {
		return 2
	}
	var data []byte
	var err error
	if sub == "list" {
		q := url.Values{"merchant_id": {*merchant}}
		if *orderID != "" {
			q.Set("order_id", *orderID)
		}
		data, err = c.do("GET", "/admin/v1/webhooks?"+q.Encode(), nil)
	} else {
		data, err = c.do("POST", "/admin/v1/webhooks/"+url.PathEscape(*id)+"/redeliver", nil)
	}
	rows, code, done := answerRows[deliveryRow](af, name, data, err, listKey(sub == "list", "deliveries"), stdout, stderr)
	if done {
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORDER ID\tORDER STATUS\tSTATE\tATTEMPTS\tLAST RESULT\tNEXT ATTEMPT\tURL")
	for _, r := range rows {
		last := "-"
		if n := len(r.Attempts); n > 0 {
			a := r.Attempts[n-1]
			if last = a.Error; a.HTTPCode != 0 {
				last = fmt.Sprintf("HTTP %d", a.HTTPCode)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.OrderID, r.OrderStatus, r.State, len(r.Attempts), last,
			dash(r.NextDueAt), r.URL)
	}
	tw.Flush()
	return 0
}
