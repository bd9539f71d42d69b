package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// expectAdminError asserts an admin answer's status and that its error
// body names code and attribute.
func expectAdminError(t *testing.T, n *nodetest.Node, path, body string, status int, code, attr string) {
	t.Helper()
	got, err := n.Admin("POST", path, body, nil)
	if got != status || err == nil || !strings.Contains(err.Error(), `"code":"`+code+`"`) || !strings.Contains(err.Error(), `"`+attr+`"`) {
		t.Fatalf("POST %s %s: %d %v, want %d %s on %s", path, body, got, err, status, code, attr)
	}
}

// The admin API refuses what would leave a merchant unusable or a cluster
// without a quorum, and a refusal changes nothing.
func TestAdminRefusesHarmfulChanges(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})

	t.Run("merchant creation", func(t *testing.T) {
		// A burst of twice this rate would overflow: every request would be 429.
		expectAdminError(t, n, "/admin/v1/merchants", `{"name":"big","rate_limit_rps":4611686018427387904}`, 422, "2.01", "rate_limit_rps")
		// A misspelt limit would make a merchant at the default without a word.
		expectAdminError(t, n, "/admin/v1/merchants", `{"name":"typo","rate_limit":5}`, 400, "2.07", "body")
		expectAdminError(t, n, "/admin/v1/merchants", `{"name":"`+strings.Repeat("é", 256)+`"}`, 422, "2.01", "name")
		m := n.CreateMerchant(t, 1_000_000_000) // the largest limit works
		if r := m.Post(t, "status", map[string]any{"order_id": "none"}); r.Status != 404 {
			t.Fatalf("a merchant at the largest limit: %d %s", r.Status, r.Body)
		}
	})

	t.Run("the only voter", func(t *testing.T) {
		expectAdminError(t, n, "/admin/v1/cluster/remove", `{"node_id":"`+n.ID+`"}`, 409, "0.03", "node_id")
		var st nodetest.SelfStatus
		if _, err := n.Admin("GET", "/admin/v1/cluster/self", "", &st); err != nil || st.State != "Leader" {
			t.Fatalf("after the refused remove: %+v %v", st, err)
		}
		var view struct {
			Members []struct {
				ID       string `json:"id"`
				Recorded bool   `json:"recorded"`
				HTTPAddr string `json:"http_addr"`
			} `json:"members"`
		}
		if _, err := n.Admin("GET", "/admin/v1/cluster", "", &view); err != nil || len(view.Members) != 1 || !view.Members[0].Recorded || view.Members[0].HTTPAddr == "" {
			t.Fatalf("the member record must survive a refused remove: %+v %v", view, err)
		}
	})

	t.Run("a leadership transfer with no one to take it", func(t *testing.T) {
		// raft's "cannot find peer" was answered 500 "internal error".
		expectAdminError(t, n, "/admin/v1/cluster/transfer-leadership", `{}`, 409, "0.03", "node_id")
	})

	t.Run("a voter that does not answer", func(t *testing.T) {
		// Added, it would count against the quorum at once: a single node
		// would stop leading.
		expectAdminError(t, n, "/admin/v1/cluster/join", `{"node_id":"n2","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, 422, "2.01", "raft_addr")
		// Not added: raft's configuration still holds this node alone, and
		// it still leads.
		var view struct {
			Members []struct {
				ID string `json:"id"`
			} `json:"members"`
		}
		if _, err := n.Admin("GET", "/admin/v1/cluster", "", &view); err != nil || len(view.Members) != 1 || view.Members[0].ID != n.ID {
			t.Fatalf("after the refused join: %+v %v", view, err)
		}
		var st nodetest.SelfStatus
		if _, err := n.Admin("GET", "/admin/v1/cluster/self", "", &st); err != nil || st.State != "Leader" {
			t.Fatalf("after the refused join: %+v %v", st, err)
		}
		resp, err := http.Get(n.URL() + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the node must still serve: %v %v", resp, err)
		}
		resp.Body.Close()
	})
}

// With one of three voters down, removing a healthy one would leave two
// voters of which one answers: refused, and the cluster goes on.
func TestClusterRemoveKeepsAQuorum(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	var down, healthy *nodetest.Node
	for _, n := range c.Nodes {
		switch {
		case n == leader:
		case down == nil:
			down = n
		default:
			healthy = n
		}
	}
	down.Kill()
	expectAdminError(t, leader, "/admin/v1/cluster/remove", `{"node_id":"`+healthy.ID+`"}`, 409, "0.03", "node_id")
	m := leader.CreateMerchant(t, 10000)
	if r := m.Post(t, "charge", chargeBody(newOrderID("quorum"), "4111111111111111", 100, 24)); r.Status != 200 {
		t.Fatalf("the cluster must go on taking writes: %s", r.Body)
	}
	// The member that is down can be removed: the two left both answer.
	if _, err := leader.Admin("POST", "/admin/v1/cluster/remove", `{"node_id":"`+down.ID+`"}`, nil); err != nil {
		t.Fatalf("remove the member that is down: %v", err)
	}
}
