package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// confirmed counts self and the voters that answered, in the round's term,
// a request sent at or after the round began; anything older or of another
// term confirms nothing.
func TestAckTransportConfirmed(t *testing.T) {
	since := time.Now()
	before, after := since.Add(-time.Millisecond), since.Add(time.Millisecond)
	three := []raft.ServerID{"a", "b", "c"}
	five := []raft.ServerID{"a", "b", "c", "d", "e"}
	type ack struct {
		id   raft.ServerID
		term uint64
		sent time.Time
	}
	for _, tc := range []struct {
		name   string
		voters []raft.ServerID
		acks   []ack
		want   bool
	}{
		{"no answer", three, nil, false},
		{"one fresh answer of three", three, []ack{{"b", 7, after}}, true},
		{"sent when the round began", three, []ack{{"b", 7, since}}, true},
		{"sent before the round", three, []ack{{"b", 7, before}, {"c", 7, before}}, false},
		{"an older term", three, []ack{{"b", 6, after}}, false},
		{"a newer term", three, []ack{{"b", 8, after}}, false},
		{"self answering itself counts once", three, []ack{{"a", 7, after}}, false},
		{"one fresh of five", five, []ack{{"b", 7, after}, {"c", 7, before}}, false},
		{"two fresh of five", five, []ack{{"b", 7, after}, {"e", 7, after}}, true},
		{"a non-voter's answer", three, []ack{{"x", 7, after}}, false},
		{"a non-voter in the configuration", append(three, "~x"), []ack{{"x", 7, after}}, false},
		{"a leader outside the configuration", []raft.ServerID{"b", "c", "d"}, []ack{{"b", 7, after}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &ackTransport{acks: map[raft.ServerID]termAck{}}
			for _, a := range tc.acks {
				tr.record(a.id, a.term, a.sent)
			}
			if got, _ := tr.confirmed(7, since, "a", servers(tc.voters)); got != tc.want {
				t.Fatalf("confirmed = %v, want %v", got, tc.want)
			}
		})
	}
}

// A newer answer replaces an older one, never the other way round, and a
// confirmation waiting for answers is woken by the next one.
func TestAckTransportRecordsTheLatest(t *testing.T) {
	since := time.Now()
	tr := &ackTransport{acks: map[raft.ServerID]termAck{}}
	voters := []raft.ServerID{"a", "b", "c"}
	ok, changed := tr.confirmed(3, since, "a", servers(voters))
	if ok || changed == nil {
		t.Fatalf("confirmed with no answer: %v %v", ok, changed)
	}
	tr.record("b", 3, since.Add(time.Millisecond))
	select {
	case <-changed:
	default:
		t.Fatal("an answer did not wake the waiting confirmation")
	}
	tr.record("b", 3, since.Add(-time.Millisecond)) // an older request answered late
	if ok, _ := tr.confirmed(3, since, "a", servers(voters)); !ok {
		t.Fatal("a late answer to an older request replaced the fresh one")
	}
	tr.record("b", 2, since.Add(time.Second)) // an answer of an older term
	if ok, _ := tr.confirmed(3, since, "a", servers(voters)); !ok {
		t.Fatal("an older term's answer replaced this term's")
	}
}

// servers is a configuration of these voters; an id starting with "~" is a
// non-voter (without the "~").
func servers(ids []raft.ServerID) []raft.Server {
	var out []raft.Server
	for _, id := range ids {
		s := raft.Server{ID: id, Suffrage: raft.Voter}
		if strings.HasPrefix(string(id), "~") {
			s = raft.Server{ID: id[1:], Suffrage: raft.Nonvoter}
		}
		out = append(out, s)
	}
	return out
}
