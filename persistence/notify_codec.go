package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/wire"
)

// Notification records are stored in binary (package wire), every field in
// declaration order after a version byte. Each delivery result rewrites the
// record, body included: as JSON that was a reflection walk and a base64
// round trip of the body per result. Records written before are JSON (they
// start with '{') and still read; they are rewritten in binary at their
// next change.

const notificationFormatV1 byte = 1

// attemptBytesMin is the smallest encoded AttemptRecord (four one-byte
// fields): a count the remaining input cannot hold is refused unallocated.
const attemptBytesMin = 4

func appendNotification(dst []byte, n *Notification) []byte {
	dst = append(dst, notificationFormatV1)
	dst = wire.AppendString(dst, n.ID)
	dst = wire.AppendString(dst, n.Merchant)
	dst = wire.AppendString(dst, n.OrderID)
	dst = wire.AppendString(dst, string(n.OrderStatus))
	dst = wire.AppendString(dst, n.URL)
	dst = wire.AppendBytes(dst, n.Body)
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
	return dst
}

// decodeNotification decodes a stored record, binary or legacy JSON. v is
// not retained.
func decodeNotification(v []byte) (*Notification, error) {
	if len(v) > 0 && v[0] == '{' {
		var n Notification
		if err := json.Unmarshal(v, &n); err != nil {
			return nil, fmt.Errorf("decode legacy JSON notification: %w", err)
		}
		return &n, nil
	}
	d := wire.NewDecoder(v, notificationFormatV1, "notification")
	n := &Notification{}
	n.ID = d.Str()
	n.Merchant = d.Str()
	n.OrderID = d.Str()
	n.OrderStatus = order.Status(d.Str())
	n.URL = d.Str()
	n.Body = d.Bytes()
	n.CreatedAt = d.Varint()
	n.State = NotifyState(d.Str())
	n.FirstAttemptAt = d.Varint()
	n.NextDueAt = d.Varint()
	if c := d.Count(attemptBytesMin); c > 0 {
		n.Attempts = make([]AttemptRecord, c)
		for i := range n.Attempts {
			a := &n.Attempts[i]
			a.At = d.Varint()
			a.HTTPCode = int(d.Varint())
			a.Error = d.Str()
			a.DurationNs = d.Varint()
		}
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return n, nil
}

// readNotification reads a notification by id through r, or nil.
func readNotification(r reader, id string) (*Notification, error) {
	return readDecoded(r, notifyKey(id), decodeNotification)
}

// putNotification writes n's record in this batch.
func (b *Batch) putNotification(n *Notification) {
	b.encBuf = appendNotification(b.encBuf[:0], n)
	b.set(notifyKey(n.ID), bytes.Clone(b.encBuf))
}
