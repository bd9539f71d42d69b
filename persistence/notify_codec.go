package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/command/wire"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// Notification records are stored in binary (package wire), every field in
// declaration order after a version byte. Each delivery result rewrites the
// record, so the body, most of a notification's bytes and the same for its
// whole life, is stored apart under b/ and written once (format 2); the
// record is then a few dozen bytes. A stored body is never read on the
// write path: applyNotify has no use for it.
//
// Format 3 adds FinishedAt after the attempts (retention).
//
// Records written before still read: format 1 holds the body inline,
// format 2 has no FinishedAt, and older ones are JSON (they start with
// '{'). Each is rewritten as format 3 at its next change, a body held
// inline then moving to b/.

const (
	notificationFormatV1 byte = 1 // body inline
	notificationFormatV2 byte = 2 // body under b/
	notificationFormatV3 byte = 3 // and FinishedAt
)

// attemptBytesMin is the smallest encoded AttemptRecord (four one-byte
// fields): a count the remaining input cannot hold is refused unallocated.
const attemptBytesMin = 4

func notifyBodyKey(id string) []byte { return append([]byte(prefixBody), id...) }

// appendNotification encodes n's record, without its body.
func appendNotification(dst []byte, n *outbox.Notification) []byte {
	return appendNotificationFormat(dst, n, notificationFormatV3)
}

// appendNotificationFormat encodes n's record in format 3, or in an older
// format for the tests that check older records still read.
func appendNotificationFormat(dst []byte, n *outbox.Notification, format byte) []byte {
	dst = append(dst, format)
	dst = wire.AppendString(dst, n.ID)
	dst = wire.AppendString(dst, n.Merchant)
	dst = wire.AppendString(dst, n.OrderID)
	dst = wire.AppendString(dst, string(n.OrderStatus))
	dst = wire.AppendString(dst, n.URL)
	if format == notificationFormatV1 {
		dst = wire.AppendBytes(dst, n.Body)
	}
	dst = binary.AppendVarint(dst, n.CreatedAt)
	dst = wire.AppendString(dst, string(n.State))
	dst = binary.AppendVarint(dst, n.FirstAttemptAt)
	dst = binary.AppendVarint(dst, n.NextDueAt)
	dst = binary.AppendUvarint(dst, uint64(len(n.Attempts)))
	for i := range n.Attempts {
		a := &n.Attempts[i]
		dst = binary.AppendVarint(dst, a.At)
		dst = binary.AppendVarint(dst, int64(a.HTTPCode))
		dst = wire.AppendString(dst, a.Error)
		dst = binary.AppendVarint(dst, a.DurationNs)
	}
	if format >= notificationFormatV3 {
		dst = binary.AppendVarint(dst, n.FinishedAt)
	}
	return dst
}

// decodeNotification decodes a stored record of any format. The body of a
// format 2 or 3 record is left nil (readNotificationBody). v is not
// retained.
func decodeNotification(v []byte) (*outbox.Notification, error) {
	if len(v) > 0 && v[0] == '{' {
		var n outbox.Notification
		if err := json.Unmarshal(v, &n); err != nil {
			return nil, fmt.Errorf("decode legacy JSON notification: %w", err)
		}
		return &n, nil
	}
	format := notificationFormatV3
	if len(v) > 0 && (v[0] == notificationFormatV1 || v[0] == notificationFormatV2) {
		format = v[0]
	}
	d := wire.NewDecoder(v, format, "notification")
	n := &outbox.Notification{}
	n.ID = d.Str()
	n.Merchant = d.Str()
	n.OrderID = d.Str()
	n.OrderStatus = order.Status(d.Str())
	n.URL = d.Str()
	if format == notificationFormatV1 {
		n.Body = d.Bytes()
	}
	n.CreatedAt = d.Varint()
	n.State = outbox.State(d.Str())
	n.FirstAttemptAt = d.Varint()
	n.NextDueAt = d.Varint()
	if c := d.Count(attemptBytesMin); c > 0 {
		n.Attempts = make([]command.AttemptRecord, c)
		for i := range n.Attempts {
			a := &n.Attempts[i]
			a.At = d.Varint()
			a.HTTPCode = int(d.Varint())
			a.Error = d.Str()
			a.DurationNs = d.Varint()
		}
	}
	if format >= notificationFormatV3 {
		n.FinishedAt = d.Varint()
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return n, nil
}

// readNotification reads a notification's record by id through r, or nil.
// Its Body is set only for a record of an older format, which holds it.
func readNotification(r reader, id string) (*outbox.Notification, error) {
	return readDecoded(r, notifyKey(id), decodeNotification)
}

// readNotificationBody sets n.Body from b/ when its record did not hold it.
// A missing body is an error: sending anything else than the body recorded
// with the status change would be a wrong notification, not a late one.
func readNotificationBody(r reader, n *outbox.Notification) error {
	if n == nil || n.Body != nil {
		return nil
	}
	body, err := get(r, notifyBodyKey(n.ID))
	switch {
	case err != nil:
		return fmt.Errorf("read body of notification %s: %w", n.ID, err)
	case body == nil:
		return fmt.Errorf("notification %s: its body is missing from the store", n.ID)
	}
	n.Body = body
	return nil
}

// putNotification writes n's record in this batch, and its body when n
// carries one: a new notification, or an older record whose body moves to
// b/ as it is rewritten. An update read without its body leaves b/ as it is.
func (b *Batch) putNotification(n *outbox.Notification) {
	b.encBuf = appendNotification(b.encBuf[:0], n)
	b.set(notifyKey(n.ID), bytes.Clone(b.encBuf))
	if n.Body != nil {
		b.set(notifyBodyKey(n.ID), n.Body)
	}
}
