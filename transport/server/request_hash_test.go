package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
)

// The pooled request hash is HMAC-SHA256 under HashKey, whatever state the
// pool hands out: bodies hashed concurrently and in any order each get
// their own hash, never one left over from another body.
func TestRequestHashIsKeyedHMACOfTheBody(t *testing.T) {
	key := []byte("request-hash-key")
	s := New(Config{HashKey: key})
	want := func(body []byte) string {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		return hex.EncodeToString(m.Sum(nil))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				body := fmt.Appendf(nil, `{"order_id":"o-%d-%d"}`, g, i)
				if got := s.requestHash(body); got != want(body) {
					errs <- fmt.Sprintf("%s: %s, want %s", body, got, want(body))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if other := New(Config{HashKey: []byte("another key")}); other.requestHash([]byte("{}")) == s.requestHash([]byte("{}")) {
		t.Error("two keys gave the same hash")
	}
}
