package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/paygate/gateway/persistence"
)

// The back office's commands (docs/back-office.md): `audit list|verify` and
// `orders get|search`, over the admin API of any member.

func init() {
	register("audit", "audit log: list records, verify the hash chain (admin API)", func(args []string) int {
		return auditCmd(args, os.Stdout, os.Stderr)
	})
	register("orders", "orders: get one, search with filters (admin API)", func(args []string) int {
		return ordersCmd(args, os.Stdout, os.Stderr)
	})
}

// adminFlags are the flags every admin command takes.
type adminFlags struct {
	addr, token *string
	asJSON      *bool
}

func newAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		addr: fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member: host:port or http://host:port"),
		// Read after parsing, so that a usage message never shows the secret.
		token:  fs.String("admin-token", "", "admin bearer token (default $GATEWAY_ADMIN_TOKEN)"),
		asJSON: fs.Bool("json", false, "print JSON instead of a table"),
	}
}

// client builds the admin client, or says why not (exit 2).
func (f adminFlags) client(name string, stderr io.Writer) (*adminClient, bool) {
	if *f.token == "" {
		*f.token = os.Getenv("GATEWAY_ADMIN_TOKEN")
	}
	if *f.token == "" {
		fmt.Fprintf(stderr, "gatewayctl %s: --admin-token or GATEWAY_ADMIN_TOKEN is required\n", name)
		return nil, false
	}
	base, err := memberURL(*f.addr)
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl %s: %v\n", name, err)
		return nil, false
	}
	return &adminClient{base: base, token: *f.token}, true
}

const auditUsage = `usage:
  gatewayctl audit list   [--after SEQ] [--limit N] [--json] [--addr A] [--admin-token T]
  gatewayctl audit verify [--file F] [--addr A] [--admin-token T]

verify reads every record (from the node, or from F: what "audit list --json"
printed) and recomputes the chain from the first record; it exits 1 at the
first broken link, naming the record.
`

type auditPage struct {
	Records   []persistence.AuditRecord `json:"records"`
	NextAfter *uint64                   `json:"next_after"`
}

func auditCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "verify") {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gatewayctl audit "+sub, flag.ContinueOnError)
	af := newAdminFlags(fs)
	after := fs.Uint64("after", 0, "list records after this seq")
	limit := fs.Int("limit", 0, "list at most N records (default: all)")
	file := fs.String("file", "", "verify the records in this file instead of asking a node")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	var recs []persistence.AuditRecord
	var err error
	if sub == "verify" && *file != "" {
		recs, err = readAuditFile(*file)
	} else {
		c, ok := af.client("audit "+sub, stderr)
		if !ok {
			return 2
		}
		recs, err = fetchAudit(c, *after, *limit)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl audit %s: %v\n", sub, err)
		return 1
	}
	if sub == "verify" {
		if seq, err := persistence.VerifyAuditChain(persistence.AuditGenesis, 0, recs); err != nil {
			fmt.Fprintf(stderr, "gatewayctl audit verify: broken at record %d: %v\n", seq, err)
			return 1
		}
		head := persistence.AuditGenesis
		if len(recs) > 0 {
			head = recs[len(recs)-1].Hash
		}
		fmt.Fprintf(stdout, "ok: %d records, the chain is intact; last hash %s\n", len(recs), head)
		return 0
	}
	if *af.asJSON {
		b, _ := json.MarshalIndent(auditPage{Records: recs}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tACTION\tTARGET\tSOURCE IP\tRESULT")
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.At, r.Actor, r.Action, r.Target, r.SourceIP, r.Result)
	}
	tw.Flush()
	return 0
}

// fetchAudit pages through GET /admin/v1/audit; limit 0 reads them all.
func fetchAudit(c *adminClient, after uint64, limit int) ([]persistence.AuditRecord, error) {
	var out []persistence.AuditRecord
	for {
		page := 1000
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		data, err := c.do("GET", "/admin/v1/audit?after="+strconv.FormatUint(after, 10)+"&limit="+strconv.Itoa(page), nil)
		if err != nil {
			return nil, err
		}
		var p auditPage
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("read the audit page: %w", err)
		}
		out = append(out, p.Records...)
		if p.NextAfter == nil || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		after = *p.NextAfter
	}
}

// readAuditFile reads {"records":[…]} (audit list --json, or the API's page).
func readAuditFile(path string) ([]persistence.AuditRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p auditPage
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: want {\"records\":[…]}: %w", path, err)
	}
	return p.Records, nil
}

const ordersUsage = `usage:
  gatewayctl orders get    --merchant-id M --order-id ID [--json] [--addr A] [--admin-token T]
  gatewayctl orders search [--merchant-id M] [--status S] [--email E] [--card-last4 NNNN] [--bin NNNNNN]
                           [--order-id-prefix P] [--created-from T] [--created-to T] [--amount-min N]
                           [--amount-max N] [--limit N] [--cursor C] [--json] [--addr A] [--admin-token T]

Times are RFC 3339; amounts in minor units. search prints one page, newest
first, and the command for the next one.
`

// searchParams maps the search's flags to the API's query parameters.
var searchParams = []string{"merchant_id", "status", "email", "card_last4", "bin", "order_id_prefix",
	"created_from", "created_to", "amount_min", "amount_max", "limit", "cursor"}

func ordersCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "get" && args[0] != "search") {
		fmt.Fprint(stderr, ordersUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gatewayctl orders "+sub, flag.ContinueOnError)
	af := newAdminFlags(fs)
	values := map[string]*string{}
	var orderID *string
	if sub == "get" {
		values["merchant_id"] = fs.String("merchant-id", "", "the order's merchant")
		orderID = fs.String("order-id", "", "the order's id")
	} else {
		for _, p := range searchParams {
			values[p] = fs.String(strings.ReplaceAll(p, "_", "-"), "", "filter: "+p)
		}
	}
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	c, ok := af.client("orders "+sub, stderr)
	if !ok {
		return 2
	}
	var path string
	if sub == "get" {
		if *values["merchant_id"] == "" || *orderID == "" {
			fmt.Fprintln(stderr, "gatewayctl orders get: --merchant-id and --order-id are required")
			return 2
		}
		path = "/admin/v1/orders/" + url.PathEscape(*values["merchant_id"]) + "/" + url.PathEscape(*orderID)
	} else {
		q := url.Values{}
		for _, p := range searchParams {
			if v := *values[p]; v != "" {
				q.Set(p, v)
			}
		}
		path = "/admin/v1/orders?" + q.Encode()
	}
	data, err := c.do("GET", path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl orders %s: %v\n", sub, err)
		return 1
	}
	if *af.asJSON {
		printJSON(stdout, data)
		return 0
	}
	var page struct {
		Orders     []orderRow `json:"orders"`
		NextCursor *string    `json:"next_cursor"`
	}
	if sub == "get" {
		var o orderRow
		err = json.Unmarshal(data, &o)
		page.Orders = []orderRow{o}
	} else {
		err = json.Unmarshal(data, &page)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl orders %s: read the answer: %v\n", sub, err)
		return 1
	}
	printOrders(stdout, page.Orders, sub == "get")
	if page.NextCursor != nil {
		fmt.Fprintf(stdout, "\nnext page: gatewayctl orders search … --cursor %s\n", *page.NextCursor)
	}
	return 0
}

// orderRow is what the table shows of an order view.
type orderRow struct {
	OrderID  string `json:"order_id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Settled  int64  `json:"settled_amount"`
	Refunded int64  `json:"refunded_amount"`
	Source   struct {
		Masked string `json:"masked_card_number"`
		Brand  string `json:"card_brand"`
	} `json:"payment_source"`
	Txns map[string]struct {
		CreatedAt string `json:"created_at"`
		Operation string `json:"operation"`
		Status    string `json:"status"`
		Amount    int64  `json:"amount"`
	} `json:"transactions"`
}

func printOrders(w io.Writer, orders []orderRow, withTxns bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tORDER ID\tSTATUS\tAMOUNT\tSETTLED\tREFUNDED\tCARD")
	for _, o := range orders {
		created := ""
		for _, t := range o.Txns {
			if created == "" || t.CreatedAt < created {
				created = t.CreatedAt
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d %s\t%d\t%d\t%s %s\n", dash(created), o.OrderID, o.Status, o.Amount, o.Currency,
			o.Settled, o.Refunded, o.Source.Brand, dash(o.Source.Masked))
	}
	tw.Flush()
	if !withTxns || len(orders) != 1 {
		return
	}
	ids := make([]string, 0, len(orders[0].Txns))
	for id := range orders[0].Txns {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return orders[0].Txns[ids[i]].CreatedAt < orders[0].Txns[ids[j]].CreatedAt })
	fmt.Fprintln(w, "\ntransactions:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tID\tOPERATION\tSTATUS\tAMOUNT")
	for _, id := range ids {
		t := orders[0].Txns[id]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", t.CreatedAt, id, t.Operation, t.Status, t.Amount)
	}
	tw.Flush()
}
