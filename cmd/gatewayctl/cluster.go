package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/paygate/gateway/cluster"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// gatewayctl cluster status|join|remove: the cluster admin API
// (/admin/v1/cluster...) with a readable table or --json.

func init() {
	register("cluster", "cluster status, join, remove and leadership transfer (admin API)", runCluster)
}

const clusterUsage = `usage:
  gatewayctl cluster status [--addr HOST:PORT] [--admin-token T] [--json] [--digest]
  gatewayctl cluster join   --node-id ID --raft-addr HOST:PORT --http-addr HOST:PORT [--addr ...]
  gatewayctl cluster remove --node-id ID [--addr ...]
  gatewayctl cluster transfer-leadership [--node-id ID] [--addr ...]

--addr is any member's HTTP address (default $GATEWAY_HTTP_ADDR or 127.0.0.1:8080);
the admin token defaults to $GATEWAY_ADMIN_TOKEN.
`

func runCluster(args []string) int { return clusterCmd(args, os.Stdout, os.Stderr) }

func clusterCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gatewayctl cluster "+sub, flag.ContinueOnError)
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member")
	token := fs.String("admin-token", os.Getenv("GATEWAY_ADMIN_TOKEN"), "admin bearer token")
	asJSON := fs.Bool("json", false, "print the JSON answer")
	var nodeID, raftAddr, httpAddr *string
	var digest *bool
	switch sub {
	case "status":
		digest = fs.Bool("digest", false, "also ask each member for its state digest (reads the whole store)")
	case "join":
		nodeID = fs.String("node-id", "", "id of the node to add")
		raftAddr = fs.String("raft-addr", "", "its Raft address")
		httpAddr = fs.String("http-addr", "", "its HTTP address")
	case "remove":
		nodeID = fs.String("node-id", "", "id of the node to remove")
	case "transfer-leadership":
		nodeID = fs.String("node-id", "", "voter to hand leadership to (default: any)")
	default:
		fmt.Fprintf(stderr, "gatewayctl cluster: unknown subcommand %q\n\n%s", sub, clusterUsage)
		return 2
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *token == "" {
		fmt.Fprintln(stderr, "gatewayctl cluster: --admin-token or GATEWAY_ADMIN_TOKEN is required")
		return 2
	}
	c := &adminClient{base: "http://" + strings.TrimPrefix(*addr, "http://"), token: *token}
	var (
		data []byte
		err  error
	)
	switch sub {
	case "status":
		path := "/admin/v1/cluster"
		if *digest {
			path += "?digest=1"
		}
		data, err = c.do("GET", path, nil)
	case "join":
		if *nodeID == "" || *raftAddr == "" || *httpAddr == "" {
			fmt.Fprintln(stderr, "gatewayctl cluster join: --node-id, --raft-addr and --http-addr are required")
			return 2
		}
		data, err = c.do("POST", "/admin/v1/cluster/join",
			map[string]string{"node_id": *nodeID, "raft_addr": *raftAddr, "http_addr": *httpAddr})
	case "remove":
		if *nodeID == "" {
			fmt.Fprintln(stderr, "gatewayctl cluster remove: --node-id is required")
			return 2
		}
		data, err = c.do("POST", "/admin/v1/cluster/remove", map[string]string{"node_id": *nodeID})
	case "transfer-leadership":
		data, err = c.do("POST", "/admin/v1/cluster/transfer-leadership", map[string]string{"node_id": *nodeID})
	}
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl cluster "+sub+":", err)
		return 1
	}
	if *asJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, data, "", "  ") == nil {
			data = buf.Bytes()
		}
		fmt.Fprintln(stdout, string(data))
		return 0
	}
	if sub == "status" {
		return printStatus(stdout, stderr, data)
	}
	return printMembers(stdout, stderr, data)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type adminClient struct {
	base, token string
}

// do sends an admin request; a non-200 answer is an error with its body.
func (c *adminClient) do(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	return data, nil
}

func printStatus(w, stderr io.Writer, data []byte) int {
	var st cluster.Status
	if err := json.Unmarshal(data, &st); err != nil {
		fmt.Fprintln(stderr, "gatewayctl cluster status: unexpected answer:", err)
		return 1
	}
	leader := st.LeaderID
	if leader == "" {
		leader = "(none)"
	}
	fmt.Fprintf(w, "leader %s, term %d (as seen by %s)\n\n", leader, st.Term, st.NodeID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tVOTER\tREACHABLE\tRAFT ADDR\tHTTP ADDR\tTERM\tCOMMIT\tAPPLIED\tLAST LOG\tSNAPSHOT\tDIGEST")
	for _, m := range st.Members {
		state, term, commit, applied, last, snap, digest := "?", "-", "-", "-", "-", "-", ""
		if s := m.Self; s != nil {
			state = s.State
			term, commit, applied = u(s.Term), u(s.CommitIndex), u(s.AppliedIndex)
			last, snap = u(s.LastLogIndex), u(s.LastSnapshotIndex)
			if len(s.Digest) >= 12 {
				digest = s.Digest[:12]
			}
		}
		reach := yesNo(m.Reachable)
		if !m.Reachable && m.Error != "" {
			reach = "no (" + shorten(m.Error, 40) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, state, yesNo(m.Voter), reach,
			m.RaftAddr, dash(m.HTTPAddr), term, commit, applied, last, snap, digest)
	}
	tw.Flush()
	return 0
}

func printMembers(w, stderr io.Writer, data []byte) int {
	var out struct {
		Members []cluster.MemberInfo `json:"members"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		fmt.Fprintln(stderr, "gatewayctl cluster: unexpected answer:", err)
		return 1
	}
	fmt.Fprintln(w, "ok; members now:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVOTER\tLEADER\tRAFT ADDR\tHTTP ADDR")
	for _, m := range out.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, yesNo(m.Voter), yesNo(m.Leader), m.RaftAddr, dash(m.HTTPAddr))
	}
	tw.Flush()
	return 0
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
