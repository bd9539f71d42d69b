package persistence

import "testing"

// Each due notification reaches the dispatcher's skip with its endpoint:
// from its queue entry, or, for an entry an older version wrote without it,
// from its record. The dispatcher passes over an endpoint's notifications
// by it, unloaded, so an entry without one must not reach it unnamed.
func TestDueNotificationsNameTheirEndpoint(t *testing.T) {
	ts := newTestStore(t)
	urls := map[string]string{
		"o-new": "https://Shop.Example:8443/hooks/paid?x=1",
		"o-old": "http://old.example/hook",
	}
	idx := uint64(0)
	for id, url := range urls {
		create, outcome := chargeCmds(id, 1e9)
		create.Order.Create.CallbackURL = url
		idx++
		ts.apply(idx, create, outcome)
	}
	due, err := ts.DueNotifications(1<<62, 10, nil)
	if err != nil || len(due) != 2 {
		t.Fatalf("due %d, err %v", len(due), err)
	}
	// o-old's queue entry as an older version wrote it: no value.
	for _, n := range due {
		if n.OrderID == "o-old" {
			if err := ts.db.Set(timedKey(prefixDue, n.NextDueAt, []byte(n.ID)), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]string{"o-new": "https://shop.example:8443", "o-old": "http://old.example"}
	byID := map[string]string{}
	for _, n := range due {
		byID[n.ID] = n.OrderID
	}
	got := map[string]string{}
	list, err := ts.DueNotifications(1<<62, 10, func(id, endpoint string) bool {
		got[byID[id]] = endpoint
		return byID[id] == "o-old" // passed over, not loaded
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["o-new"] != want["o-new"] || got["o-old"] != want["o-old"] {
		t.Fatalf("endpoints passed to skip: %v, want %v", got, want)
	}
	if len(list) != 1 || list[0].OrderID != "o-new" {
		t.Fatalf("listed %v, want o-new only", list)
	}
}
