package persistence

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
)

func sampleNotification(attempts int) *Notification {
	n := &Notification{
		ID: "ntf_0123456789abcdef01234567", Merchant: "m1", OrderID: "o-1", OrderStatus: order.StatusAuthorized,
		URL: "https://merchant.example/hooks?x=1", Body: []byte(`{"order_id":"o-1","status":"authorized"}`),
		CreatedAt: 1_795_000_000_000_000_000, State: NotifyPending, FirstAttemptAt: 1_795_000_000_100_000_000,
		NextDueAt: -5, // any int64 round-trips
	}
	for i := range attempts {
		n.Attempts = append(n.Attempts, AttemptRecord{At: int64(i+1) * 1e9, HTTPCode: 500 + i, Error: fmt.Sprintf("http status %d", 500+i), DurationNs: 1234567})
	}
	return n
}

func TestNotificationCodec(t *testing.T) {
	// A field added to Notification must be set here, and so be checked by
	// the round trip below (and added to the codec).
	full := reflect.ValueOf(sampleNotification(1)).Elem()
	for i := range full.NumField() {
		if full.Field(i).IsZero() {
			t.Fatalf("sampleNotification leaves %s unset", full.Type().Field(i).Name)
		}
	}
	attempt := reflect.ValueOf(sampleNotification(1).Attempts[0])
	for i := range attempt.NumField() {
		if attempt.Field(i).IsZero() {
			t.Fatalf("sampleNotification leaves AttemptRecord.%s unset", attempt.Type().Field(i).Name)
		}
	}
	for _, n := range []*Notification{{}, sampleNotification(0), sampleNotification(1), sampleNotification(attemptsMax)} {
		b := appendNotification([]byte("prefix"), n)[len("prefix"):]
		got, err := decodeNotification(b)
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, n)
		}
		if !bytes.Equal(appendNotification(nil, got), b) {
			t.Fatal("encoding is not canonical")
		}
		for i := range b {
			b[i] = 0xff
		}
		if !reflect.DeepEqual(got, n) {
			t.Fatal("decoded notification aliases the input")
		}

		if n.ID == "" {
			continue // JSON decodes the zero record's empty body as [], not nil
		}
		// Records written before the binary form are JSON.
		legacy, err := json.Marshal(n, json.Deterministic(true))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeNotification(legacy); err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("legacy JSON: %v\n got %+v\nwant %+v", err, got, n)
		}
	}

	valid := appendNotification(nil, sampleNotification(3))
	for i := range len(valid) {
		if _, err := decodeNotification(valid[:i]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", i, len(valid))
		}
	}
	if _, err := decodeNotification(append(valid, 0)); err == nil {
		t.Fatal("trailing byte: no error")
	}
	bad := bytes.Clone(valid)
	bad[0] = 9
	if _, err := decodeNotification(bad); err == nil {
		t.Fatal("unknown version: no error")
	}
}

// A notification written with its status change (the authorisation), then a failed attempt and
// a delivery, reads back as it stands after each, from Pebble; a legacy
// JSON record takes an update and is rewritten in binary.
func TestNotificationLifecycle(t *testing.T) {
	ts := newTestStore(t)
	create, outcome := chargeCmds("o-1", 1e9)
	create.Order.Create.CallbackURL = "https://merchant.example/hook"
	ts.apply(1, create)
	b := ts.NewBatch()
	if r := b.Apply(outcome); r.Err != nil || r.Order.Status != order.StatusAuthorized {
		t.Fatalf("outcome: %+v", r)
	}
	if len(b.Created) != 1 {
		t.Fatalf("notifications created: %d", len(b.Created))
	}
	n := b.Created[0]
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ts.reopen()
	if got, err := ts.Notification(n.ID); err != nil || !reflect.DeepEqual(got, n) {
		t.Fatalf("after create: %v\n got %+v\nwant %+v", err, got, n)
	}
	if due, _ := ts.DueNotifications(n.NextDueAt, 10, nil); len(due) != 1 || due[0].ID != n.ID {
		t.Fatalf("due after create: %+v", due)
	}

	failed := AttemptRecord{At: 10, HTTPCode: 503, Error: "http status 503", DurationNs: 7}
	r := ts.apply(3, &Cmd{Notify: &NotifyUpdate{ID: n.ID, Time: 10, Attempt: &failed, NextDueAt: 5000}})[0]
	if r.Err != nil || r.Notification.State != NotifyPending || r.Notification.NextDueAt != 5000 || len(r.Notification.Attempts) != 1 {
		t.Fatalf("failed attempt: %+v", r)
	}
	ts.reopen()
	got, err := ts.Notification(n.ID)
	if err != nil || !reflect.DeepEqual(got, r.Notification) {
		t.Fatalf("after failed attempt: %v\n got %+v\nwant %+v", err, got, r.Notification)
	}
	if due, _ := ts.DueNotifications(4999, 10, nil); len(due) != 0 {
		t.Fatalf("due before the retry time: %+v", due)
	}

	// The same record as JSON, as an older version wrote it.
	legacy, err := json.Marshal(got, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.db.Set(notifyKey(n.ID), legacy, nil); err != nil {
		t.Fatal(err)
	}
	ok := AttemptRecord{At: 5000, HTTPCode: 200, DurationNs: 9}
	r = ts.apply(4, &Cmd{Notify: &NotifyUpdate{ID: n.ID, Time: 5000, Attempt: &ok, Delivered: true}})[0]
	if r.Err != nil || r.Notification.State != NotifyDelivered || len(r.Notification.Attempts) != 2 {
		t.Fatalf("delivery: %+v", r)
	}
	v, closer, err := ts.db.Get(notifyKey(n.ID))
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != notificationFormatV1 {
		t.Fatalf("record after an update starts with %q, want the binary version byte", v[0])
	}
	closer.Close()
	if got, err := ts.Notification(n.ID); err != nil || !reflect.DeepEqual(got, r.Notification) {
		t.Fatalf("after delivery: %v\n got %+v\nwant %+v", err, got, r.Notification)
	}
	if list, err := ts.Notifications("m_bench", "o-1", 10); err != nil || len(list) != 1 || list[0].State != NotifyDelivered {
		t.Fatalf("listing: %v %+v", err, list)
	}
}
