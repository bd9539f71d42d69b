package nodetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/cluster"
)

// Cluster is a set of gatewayd processes forming one raft cluster.
type Cluster struct {
	t       testing.TB
	Nodes   []*Node
	KeyFile string
}

// StartCluster starts n nodes that share one vault key file and the admin
// token: node1 bootstraps, the others start with --join pointing at it,
// exactly as docs/cluster.md tells operators to. It returns once every node
// is ready and the cluster lists n reachable voters. args go to every node.
func StartCluster(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, KeyFile: NewKeyFile(t)}
	for i := 1; i <= n; i++ {
		o := Options{ID: "node" + strconv.Itoa(i), KeyFile: c.KeyFile, Args: args}
		if i > 1 {
			o.Join = c.Nodes[0].HTTPAddr
		}
		c.Nodes = append(c.Nodes, Start(t, o))
	}
	c.WaitMembers(n, 30*time.Second)
	return c
}

// ClusterOf groups nodes started one by one (with options StartCluster
// does not give) into a Cluster.
func ClusterOf(t testing.TB, keyFile string, nodes ...*Node) *Cluster {
	return &Cluster{t: t, KeyFile: keyFile, Nodes: nodes}
}

// ByID returns the node with that id.
func (c *Cluster) ByID(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// Alive reports whether the process runs.
func (n *Node) Alive() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// SelfStatus is a node's answer to GET /admin/v1/cluster/self.
type SelfStatus = cluster.SelfStatus

var adminClient = testClient

// Admin sends an admin request and decodes a JSON answer into out (may be nil).
func (n *Node) Admin(method, path, body string, out any) (int, error) {
	req, err := http.NewRequest(method, n.URL()+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	token := AdminToken
	if n.Token != "" {
		token = n.Token
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%v: %s", err, data)
		}
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return 200, nil
}

// Self asks the node for its own raft view (with the state digest when
// digest is set).
func (n *Node) Self(digest bool) (*SelfStatus, error) {
	var st SelfStatus
	path := "/admin/v1/cluster/self"
	if digest {
		path += "?digest=1"
	}
	if _, err := n.Admin("GET", path, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Leader returns the running node that reports itself leader, or nil. A
// paused node is not asked: it would not answer.
func (c *Cluster) Leader() *Node {
	for _, n := range c.Nodes {
		if !n.Alive() || n.Paused() {
			continue
		}
		if st, err := n.Self(false); err == nil && st.State == "Leader" {
			return n
		}
	}
	return nil
}

// Other returns the first node that is none of not (a follower, given the
// leader).
func (c *Cluster) Other(not ...*Node) *Node {
	for _, n := range c.Nodes {
		if !slices.Contains(not, n) {
			return n
		}
	}
	c.t.Fatalf("no node besides the %d given", len(not))
	return nil
}

// WaitLeader waits for a leader other than not (nil: any).
func (c *Cluster) WaitLeader(not *Node, timeout time.Duration) *Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.Leader(); l != nil && l != not {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %s", timeout)
	return nil
}

// MemberView is one member of GET /admin/v1/cluster.
type MemberView = cluster.MemberStatus

// ClusterView is GET /admin/v1/cluster.
type ClusterView = cluster.Status

// Status asks the node for the cluster status.
func (n *Node) Status() (*ClusterView, error) {
	var v ClusterView
	if _, err := n.Admin("GET", "/admin/v1/cluster", "", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// WaitMembers waits until some node lists want reachable voters, each with
// its member record (HTTP address).
func (c *Cluster) WaitMembers(want int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			v, err := n.Status()
			if err != nil {
				last = err.Error()
				continue
			}
			ok := 0
			for _, m := range v.Members {
				if m.Voter && m.Reachable && m.HTTPAddr != "" {
					ok++
				}
			}
			if ok == want && len(v.Members) == want {
				return
			}
			last = fmt.Sprintf("%+v", v.Members)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("cluster did not list %d reachable voters within %s: %s", want, timeout, last)
}

// WaitConverged waits until every running node reports the same state
// digest at the same applied index, and returns that index.
func (c *Cluster) WaitConverged(timeout time.Duration) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var ref *SelfStatus
		same := true
		last = ""
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			st, err := n.Self(true)
			if err != nil {
				same = false
				last += n.ID + ": " + err.Error() + "; "
				continue
			}
			last += fmt.Sprintf("%s: index %d digest %.12s; ", n.ID, st.DigestIndex, st.Digest)
			if ref == nil {
				ref = st
			} else if st.Digest != ref.Digest || st.DigestIndex != ref.DigestIndex {
				same = false
			}
		}
		if same && ref != nil {
			return ref.DigestIndex
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("replicas did not converge within %s: %s", timeout, last)
	return 0
}
