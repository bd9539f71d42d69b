package persistence

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

func sampleNotification(attempts int) *outbox.Notification {
	n := &outbox.Notification{
		ID: "ntf_0123456789abcdef01234567", Merchant: "m1", OrderID: "o-1", OrderStatus: order.StatusAuthorized,
		URL: "https://merchant.example/hooks?x=1", Body: []byte(`{"order_id":"o-1","status":"authorized"}`),
		CreatedAt: 1_795_000_000_000_000_000, State: outbox.Pending, FirstAttemptAt: 1_795_000_000_100_000_000,
		NextDueAt: -5, FinishedAt: -7, // any int64 round-trips
	}
	for i := range attempts {
		n.Attempts = append(n.Attempts, command.AttemptRecord{At: int64(i+1) * 1e9, HTTPCode: 500 + i, Error: fmt.Sprintf("http status %d", 500+i), DurationNs: 1234567})
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
	for _, n := range []*outbox.Notification{{}, sampleNotification(0), sampleNotification(1), sampleNotification(outbox.AttemptsMax)} {
		// Format 3, as records are written now: the body is stored apart.
		record := *n
		record.Body = nil
		checkNotificationRoundTrip(t, appendNotification([]byte("prefix"), n)[len("prefix"):], &record)
		// Format 2, as an older version wrote records: no FinishedAt.
		older := record
		older.FinishedAt = 0
		checkNotificationRoundTrip(t, appendNotificationFormat([]byte("prefix"), &older, notificationFormatV2)[len("prefix"):], &older)
		// Format 1, older still: the body inline.
		older.Body = n.Body
		checkNotificationRoundTrip(t, appendNotificationFormat([]byte("prefix"), &older, notificationFormatV1)[len("prefix"):], &older)

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

	for _, valid := range [][]byte{
		appendNotification(nil, sampleNotification(3)),
		appendNotificationFormat(nil, sampleNotification(3), notificationFormatV2),
		appendNotificationFormat(nil, sampleNotification(3), notificationFormatV1),
	} {
		for i := range len(valid) {
			if _, err := decodeNotification(valid[:i]); err == nil {
				t.Fatalf("format %d truncated to %d of %d bytes: no error", valid[0], i, len(valid))
			}
		}
		if _, err := decodeNotification(append(valid, 0)); err == nil {
			t.Fatalf("format %d, trailing byte: no error", valid[0])
		}
		bad := bytes.Clone(valid)
		bad[0] = 9
		if _, err := decodeNotification(bad); err == nil {
			t.Fatal("unknown version: no error")
		}
	}
}

// checkNotificationRoundTrip decodes b, wants want, and checks that the
// encoding is canonical and that the result does not alias b.
func checkNotificationRoundTrip(t *testing.T, b []byte, want *outbox.Notification) {
	t.Helper()
	got, err := decodeNotification(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("format %d round trip: %v\n got %+v\nwant %+v", b[0], err, got, want)
	}
	if again := appendNotificationFormat(nil, got, b[0]); !bytes.Equal(again, b) {
		t.Fatalf("format %d: encoding is not canonical", b[0])
	}
	for i := range b {
		b[i] = 0xff
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("decoded notification aliases the input")
	}
}

// A notification written with its status change (the authorisation), then a failed attempt and
// a delivery, reads back as it stands after each, from Pebble, with its
// body; the body is written once, apart from the record every attempt
// rewrites. Records of older formats (JSON, and binary with the body
// inline) take an update and are rewritten in the current one, their body
// moving out.
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
	if len(n.Body) == 0 {
		t.Fatal("a new notification has no body")
	}
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ts.reopen()
	if got, err := ts.Notification(n.ID); err != nil || !reflect.DeepEqual(got, n) {
		t.Fatalf("after create: %v\n got %+v\nwant %+v", err, got, n)
	}
	if due, _ := ts.DueNotifications(n.NextDueAt, 10, nil); len(due) != 1 || due[0].ID != n.ID || !bytes.Equal(due[0].Body, n.Body) {
		t.Fatalf("due after create: %+v", due)
	}
	if rec := storedValue(t, ts, notifyKey(n.ID)); rec[0] != notificationFormatV3 || bytes.Contains(rec, n.Body) {
		t.Fatalf("record after create: format %d, %d bytes, holds the body: %t", rec[0], len(rec), bytes.Contains(rec, n.Body))
	}

	failed := command.AttemptRecord{At: 10, HTTPCode: 503, Error: "http status 503", DurationNs: 7}
	b = ts.NewBatch()
	r := b.Apply(&command.Cmd{Notify: &command.NotifyUpdate{ID: n.ID, Time: 10, Attempt: &failed, NextDueAt: 5000}})
	if r.Err != nil || r.Notification.State != outbox.Pending || r.Notification.NextDueAt != 5000 || len(r.Notification.Attempts) != 1 {
		t.Fatalf("failed attempt: %+v", r)
	}
	if _, rewritten := b.written[string(notifyBodyKey(n.ID))]; rewritten {
		t.Fatal("an attempt's result rewrote the body")
	}
	if err := b.Commit(3); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ts.reopen()
	want := *r.Notification
	want.Body = n.Body
	got, err := ts.Notification(n.ID)
	if err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("after failed attempt: %v\n got %+v\nwant %+v", err, got, &want)
	}
	if due, err := ts.DueNotifications(4999, 10, nil); err != nil || len(due) != 0 {
		t.Fatalf("due before the retry time: %+v (%v)", due, err)
	}
	if due, _ := ts.DueNotifications(5000, 10, nil); len(due) != 1 || !bytes.Equal(due[0].Body, n.Body) {
		t.Fatalf("due at the retry time, with its body: %+v", due)
	}

	// The same record as older versions wrote it: JSON and binary format 1
	// with the body inline, format 2 without FinishedAt. Each takes an
	// update.
	legacyFormats := []struct {
		name   string
		encode func(*outbox.Notification) ([]byte, error)
	}{
		{"JSON", func(n *outbox.Notification) ([]byte, error) { return json.Marshal(n, json.Deterministic(true)) }},
		{"format 1", func(n *outbox.Notification) ([]byte, error) {
			return appendNotificationFormat(nil, n, notificationFormatV1), nil
		}},
		{"format 2", func(n *outbox.Notification) ([]byte, error) {
			return appendNotificationFormat(nil, n, notificationFormatV2), nil
		}},
	}
	for i, format := range legacyFormats {
		legacy, err := format.encode(&want)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.db.Set(notifyKey(n.ID), legacy, nil); err != nil {
			t.Fatal(err)
		}
		if format.name != "format 2" {
			if err := ts.db.Delete(notifyBodyKey(n.ID), nil); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := ts.Notification(n.ID); err != nil || !reflect.DeepEqual(got, &want) {
			t.Fatalf("%s record: %v\n got %+v\nwant %+v", format.name, err, got, &want)
		}
		redeliver := &command.NotifyUpdate{ID: n.ID, Time: 4000 + int64(i), Redeliver: true}
		r = ts.apply(4+uint64(i), &command.Cmd{Notify: redeliver})[0]
		if r.Err != nil || r.Notification.State != outbox.Pending {
			t.Fatalf("%s record, redelivery: %+v", format.name, r)
		}
		if rec := storedValue(t, ts, notifyKey(n.ID)); rec[0] != notificationFormatV3 {
			t.Fatalf("%s record after an update starts with %q, want format 3", format.name, rec[0])
		}
		if body := storedValue(t, ts, notifyBodyKey(n.ID)); !bytes.Equal(body, n.Body) {
			t.Fatalf("%s record: body under b/ after an update: %q", format.name, body)
		}
		want = *r.Notification
		want.Body = n.Body
	}

	ok := command.AttemptRecord{At: 5000, HTTPCode: 200, DurationNs: 9}
	r = ts.apply(6, &command.Cmd{Notify: &command.NotifyUpdate{ID: n.ID, Time: 5000, Attempt: &ok, Delivered: true}})[0]
	if r.Err != nil || r.Notification.State != outbox.Delivered || len(r.Notification.Attempts) != 2 {
		t.Fatalf("delivery: %+v", r)
	}
	want = *r.Notification
	want.Body = n.Body
	if got, err := ts.Notification(n.ID); err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("after delivery: %v\n got %+v\nwant %+v", err, got, &want)
	}
	if list, err := ts.Notifications("m_bench", "o-1", 10); err != nil || len(list) != 1 || list[0].State != outbox.Delivered || !bytes.Equal(list[0].Body, n.Body) {
		t.Fatalf("listing: %v %+v", err, list)
	}

	// A record whose body is gone is an error, never a notification sent
	// with an empty body.
	if err := ts.db.Delete(notifyBodyKey(n.ID), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.Notification(n.ID); err == nil {
		t.Fatalf("body missing: no error, got %+v", got)
	}
	if list, err := ts.Notifications("m_bench", "o-1", 10); err == nil {
		t.Fatalf("body missing, listing: no error, got %+v", list)
	}
}

// storedValue reads key straight from Pebble; the key must exist.
func storedValue(t *testing.T, ts *testStore, key []byte) []byte {
	t.Helper()
	v, err := get(ts.db, key)
	if err != nil || v == nil {
		t.Fatalf("%q: %v (absent: %t)", key, err, v == nil)
	}
	return v
}
