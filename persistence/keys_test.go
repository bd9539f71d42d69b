package persistence

import (
	"bytes"
	"testing"
)

// The one-allocation key builders make the keys the general ones do: a
// schedule entry written by one and deleted by the other must be the same key.
func TestKeyBuildersAgree(t *testing.T) {
	for _, c := range []struct{ merchant, id string }{{"mer_1", "o-1"}, {"", ""}, {"m", "id with spaces/and\x00nul"}} {
		want := timedKey(prefixSettle, 1_700_000_000_123_456_789, refKey("", c.merchant, c.id))
		if got := timedRefKey(prefixSettle, 1_700_000_000_123_456_789, c.merchant, c.id); !bytes.Equal(got, want) {
			t.Errorf("timedRefKey(%q, %q) = %q, want %q", c.merchant, c.id, got, want)
		}
		var buf [128]byte
		if got, want := appendRefKey(buf[:0], prefixOrder, c.merchant, c.id), orderKey(c.merchant, c.id); !bytes.Equal(got, want) {
			t.Errorf("appendRefKey(%q, %q) = %q, want %q", c.merchant, c.id, got, want)
		}
	}
}
