package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/transport/apierr"
)

// gatewayctl cluster status|join|remove: the cluster admin API
// (/admin/v1/cluster...) with a readable table or --json.

func init() {
	register("cluster", "cluster status, join, remove, leadership transfer and join tokens (admin API)", runCluster)
}

const clusterUsage = `usage:
  gatewayctl cluster status [--addr HOST:PORT] [--admin-token T] [--json] [--digest]
  gatewayctl cluster join   --node-id ID --raft-addr HOST:PORT --http-addr HOST:PORT [--addr ...]
  gatewayctl cluster remove --node-id ID [--addr ...]
  gatewayctl cluster transfer-leadership [--node-id ID] [--addr ...]
  gatewayctl cluster join-token [--ttl 1h] [--addr ...]

--addr is any member's HTTP address, host:port, http://host:port or
https://host:port for a member serving TLS (--http-tls-cert-file; default
$GATEWAY_HTTP_ADDR or 127.0.0.1:8080); the admin
token defaults to $GATEWAY_ADMIN_TOKEN. transfer-leadership waits (up to 5 s)
until a leader is known and names it.
`

func runCluster(args []string) int { return clusterCmd(args, os.Stdout, os.Stderr) }

func clusterCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gatewayctl cluster "+sub, flag.ContinueOnError)
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "HTTP address of any member: host:port or http://host:port")
	// The token's default is read after parsing, so that the usage printed
	// on a mistyped command does not show the secret.
	token := fs.String("admin-token", "", "admin bearer token (default $GATEWAY_ADMIN_TOKEN)")
	asJSON := fs.Bool("json", false, "print the JSON answer")
	var nodeID, raftAddr, httpAddr *string
	var digest *bool
	var ttl *time.Duration
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
	case "join-token":
		ttl = fs.Duration("ttl", time.Hour, "how long the token lets nodes join (up to 168h)")
	default:
		fmt.Fprintf(stderr, "gatewayctl cluster: unknown subcommand %q\n\n%s", sub, clusterUsage)
		return 2
	}
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if *token == "" {
		*token = os.Getenv("GATEWAY_ADMIN_TOKEN")
	}
	if *token == "" {
		fmt.Fprintln(stderr, "gatewayctl cluster: --admin-token or GATEWAY_ADMIN_TOKEN is required")
		return 2
	}
	base, err := memberURL(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl cluster "+sub+":", err)
		return 2
	}
	c := &adminClient{base: base, token: *token}
	var data []byte
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
	case "join-token":
		if *ttl < time.Second {
			fmt.Fprintln(stderr, "gatewayctl cluster join-token: --ttl must be at least 1s")
			return 2
		}
		if data, err = c.do("POST", "/admin/v1/cluster/join-token", map[string]int64{"ttl_seconds": int64(*ttl / time.Second)}); err == nil && !*asJSON {
			return printJoinToken(stdout, stderr, data)
		}
	case "transfer-leadership":
		if _, err = c.do("POST", "/admin/v1/cluster/transfer-leadership", map[string]string{"node_id": *nodeID}); err != nil {
			break
		}
		// The answer's members were read on the old leader as it stepped
		// down, when no node led yet: ask until a leader is known.
		var st *cluster.Status
		if st, err = c.awaitLeader(leaderWait); err == nil {
			return printTransfer(stdout, st, *asJSON)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl cluster "+sub+":", err)
		return 1
	}
	if *asJSON {
		printJSON(stdout, data)
		return 0
	}
	if sub == "status" {
		return printStatus(stdout, stderr, data)
	}
	return printMembers(stdout, stderr, data)
}

// printJoinToken prints the token alone on stdout (so that
// GATEWAY_JOIN_TOKEN=$(gatewayctl cluster join-token) works) and its expiry
// on stderr.
func printJoinToken(stdout, stderr io.Writer, data []byte) int {
	var ans struct {
		JoinToken string `json:"join_token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal(data, &ans); err != nil || ans.JoinToken == "" {
		fmt.Fprintf(stderr, "gatewayctl cluster join-token: unexpected answer: %s\n", data)
		return 1
	}
	fmt.Fprintln(stdout, ans.JoinToken)
	fmt.Fprintf(stderr, "join token valid until %s: start new nodes with GATEWAY_JOIN_TOKEN=<token> gatewayd --join <member> ...\n", ans.ExpiresAt)
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// memberURL turns --addr into a member's base URL: host:port or
// http://host:port (a host alone is port 80), or https://host:port for a
// member that serves TLS. Paths are refused rather than dropped.
func memberURL(addr string) (string, error) {
	hp, scheme := addr, "http://"
	if len(hp) >= 8 && strings.EqualFold(hp[:8], "https://") {
		hp, scheme = hp[8:], "https://"
	} else if len(hp) >= 7 && strings.EqualFold(hp[:7], "http://") {
		hp = hp[7:]
	}
	hp = strings.TrimSuffix(hp, "/")
	// A host without a port is port 80 (a member behind a proxy).
	host, port, err := net.SplitHostPort(hp)
	if err != nil && !strings.Contains(hp, ":") {
		host, port, err = hp, "80", nil
	}
	if err != nil || host == "" || port == "" || strings.ContainsAny(hp, "/?#@ ") {
		return "", fmt.Errorf("--addr %q: want a member's HTTP address, host:port, http://host:port or https://host:port", addr)
	}
	return scheme + hp, nil
}

// leaderWait bounds how long transfer-leadership waits for a leader to be
// known after the transfer; leaderPoll is how often it asks meanwhile.
var leaderWait, leaderPoll = 5 * time.Second, 100 * time.Millisecond

// awaitLeader reads the cluster status until it names a leader that says
// itself it leads: a follower that has not yet heard from the new leader
// still names the old one, which reports Follower.
func (c *adminClient) awaitLeader(wait time.Duration) (*cluster.Status, error) {
	deadline := time.Now().Add(wait)
	for {
		data, err := c.do("GET", "/admin/v1/cluster", nil)
		if err == nil {
			var st cluster.Status
			if err = json.Unmarshal(data, &st); err == nil {
				for _, m := range st.Members {
					if st.LeaderID != "" && m.ID == st.LeaderID && m.Self != nil && m.Self.State == "Leader" {
						return &st, nil
					}
				}
			}
		}
		if time.Now().Add(leaderPoll).After(deadline) {
			msg := fmt.Sprintf("leadership was handed over, but no leader is known after %s (see gatewayctl cluster status)", wait)
			if err != nil {
				msg += ": " + err.Error()
			}
			return nil, errors.New(msg)
		}
		time.Sleep(leaderPoll)
	}
}

// printTransfer names the new leader and lists the members as the status
// shows them; --json keeps the shape of the other membership answers
// ({"status","members"}) and adds leader_id.
func printTransfer(w io.Writer, st *cluster.Status, asJSON bool) int {
	members := make([]cluster.MemberInfo, len(st.Members))
	for i, m := range st.Members {
		members[i] = m.MemberInfo
		members[i].Leader = m.ID == st.LeaderID
	}
	if asJSON {
		b, _ := json.MarshalIndent(map[string]any{"status": "ok", "leader_id": st.LeaderID, "members": members}, "", "  ")
		fmt.Fprintln(w, string(b))
		return 0
	}
	fmt.Fprintf(w, "ok; leader is now %s (term %d); members now:\n", st.LeaderID, st.Term)
	printMemberTable(w, members)
	return 0
}

type adminClient struct {
	base, token string
}

// do sends an admin request; a non-200 answer is an error saying what the
// body says (answerError).
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
		return nil, answerError(resp.StatusCode, data)
	}
	return data, nil
}

// answerError reads an error answer in the contract's shape
// ({"error":{"code","messages":{attribute:[...]}}}) as text, e.g.
// "401 1.01: authorization: admin bearer token missing or wrong"; any other
// body (a proxy's page, a node of another version) is shown as it came.
func answerError(status int, data []byte) error {
	var body apierr.Body
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" && len(body.Error.Messages) > 0 {
		attrs := make([]string, 0, len(body.Error.Messages))
		for a := range body.Error.Messages {
			attrs = append(attrs, a)
		}
		sort.Strings(attrs)
		var msgs []string
		for _, a := range attrs {
			for _, m := range body.Error.Messages[a] {
				msgs = append(msgs, a+": "+m)
			}
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%d %s: %s", status, body.Error.Code, strings.Join(msgs, "; "))
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("HTTP %d %s", status, http.StatusText(status))
	}
	return fmt.Errorf("HTTP %d: %s", status, bytes.TrimSpace(data))
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
	printMemberTable(w, out.Members)
	return 0
}

func printMemberTable(w io.Writer, members []cluster.MemberInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVOTER\tLEADER\tRAFT ADDR\tHTTP ADDR")
	for _, m := range members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, yesNo(m.Voter), yesNo(m.Leader), m.RaftAddr, dash(m.HTTPAddr))
	}
	tw.Flush()
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
