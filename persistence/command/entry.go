package command

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
)

// Log entry format. An entry carries the commands of one or more proposals
// (cluster's proposer packs them) and every replica decodes it, so on the write
// path its codec is paid once on the leader and once per replica.
//
//	entryFormatV1  uvarint(count)  count × { tag  uvarint(len)  payload }
//
// tag entryOrder: the payload is AppendCommand (binary; Cmd.Order is the
// only field set). tag entryJSON: the payload is the whole Cmd as JSON:
// merchants, notification updates, members, which are rare, and any Cmd
// that is not a lone order command, so a Cmd field added later is carried
// without a change here.
//
// Entries written before this format are a JSON array of Cmd and start
// with '['; entryFormatV1 can never start JSON, and DecodeEntry still reads
// them, so an existing data dir's log replays.
const (
	entryFormatV1 byte = 1

	entryOrder byte = 1
	entryJSON  byte = 2
)

// entryCmdBytesMin is the smallest encoded command (tag and length).
const entryCmdBytesMin = 2

// EncodeEntry encodes the commands of one log entry.
func EncodeEntry(cmds []Cmd) ([]byte, error) {
	return AppendEntry(make([]byte, 0, 16+256*len(cmds)), cmds)
}

// AppendEntry appends the encoding of one log entry to dst (the
// proposer reuses one buffer for every entry it packs).
func AppendEntry(dst []byte, cmds []Cmd) ([]byte, error) {
	dst = append(dst, entryFormatV1)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		if c.Order != nil && *c == (Cmd{Order: c.Order}) {
			dst = append(dst, entryOrder)
			start := len(dst)
			dst = AppendCommand(dst, c.Order)
			dst = prefixLength(dst, start)
			continue
		}
		js, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode command %d of the entry: %w", i, err)
		}
		dst = append(dst, entryJSON)
		dst = binary.AppendUvarint(dst, uint64(len(js)))
		dst = append(dst, js...)
	}
	return dst, nil
}

// prefixLength inserts the uvarint length of dst[start:] before it: the
// command is encoded in place first, so it is not copied through a
// temporary buffer.
func prefixLength(dst []byte, start int) []byte {
	n := len(dst) - start
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	dst = append(dst, hdr[:h]...)
	copy(dst[start+h:], dst[start:start+n])
	copy(dst[start:], hdr[:h])
	return dst
}

// DecodeEntry decodes a log entry written by EncodeEntry, or by the JSON
// encoding that preceded it. It never panics on corrupt input; every
// replica fails the same bytes the same way.
func DecodeEntry(data []byte) ([]Cmd, error) {
	if len(data) == 0 {
		return nil, errors.New("empty log entry")
	}
	switch data[0] {
	case '[':
		var cmds []Cmd
		if err := json.Unmarshal(data, &cmds); err != nil {
			return nil, fmt.Errorf("legacy JSON entry: %w", err)
		}
		return cmds, nil
	case entryFormatV1:
	default:
		return nil, fmt.Errorf("unknown log entry format %#x", data[0])
	}
	rest := data[1:]
	count, n := binary.Uvarint(rest)
	if n <= 0 || count > uint64(len(rest)-n)/entryCmdBytesMin {
		return nil, errors.New("log entry: bad command count")
	}
	rest = rest[n:]
	cmds := make([]Cmd, count)
	for i := range cmds {
		if len(rest) == 0 {
			return nil, fmt.Errorf("log entry: command %d: truncated", i)
		}
		tag := rest[0]
		size, n := binary.Uvarint(rest[1:])
		if n <= 0 || size > uint64(len(rest)-1-n) {
			return nil, fmt.Errorf("log entry: command %d: bad length", i)
		}
		payload := rest[1+n : 1+n+int(size)]
		rest = rest[1+n+int(size):]
		switch tag {
		case entryOrder:
			c, err := DecodeCommand(payload)
			if err != nil {
				return nil, fmt.Errorf("log entry: command %d: %w", i, err)
			}
			cmds[i].Order = c
		case entryJSON:
			if err := json.Unmarshal(payload, &cmds[i]); err != nil {
				return nil, fmt.Errorf("log entry: command %d: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("log entry: command %d: unknown tag %#x", i, tag)
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("log entry: %d trailing bytes", len(rest))
	}
	return cmds, nil
}
