package operator

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPasswordHashVerifies(t *testing.T) {
	h, err := HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(h, "correct horse") {
		t.Fatalf("hash %q is not the PHC string of argon2id with the chosen parameters", h)
	}
	h2, _ := HashPassword("correct horse battery")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	for _, tc := range []struct {
		pw   string
		want bool
	}{{"correct horse battery", true}, {"correct horse batterY", false}, {"", false}, {"correct horse battery ", false}} {
		if ok, err := VerifyPassword(h, tc.pw); err != nil || ok != tc.want {
			t.Errorf("VerifyPassword(%q) = %v, %v; want %v", tc.pw, ok, err, tc.want)
		}
	}
}

// A stored hash that is not argon2id, or asks for absurd parameters, is
// an error rather than a check that could cost gigabytes or pass.
func TestVerifyRefusesBadHashes(t *testing.T) {
	for _, h := range []string{"", "plain", "$2a$10$abcdefghijklmnopqrstuv", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA",
		"$argon2id$v=16$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"} {
		if ok, err := VerifyPassword(h, "x"); ok || err == nil {
			t.Errorf("VerifyPassword(%q) = %v, %v; want an error", h, ok, err)
		}
	}
}

func TestPasswordPolicy(t *testing.T) {
	for _, tc := range []struct {
		pw, want string
	}{
		{"short", "at least 12"}, {"ABCDEFGHIJK", "at least 12"}, {"ann@example.com", "not be the email"},
		{strings.Repeat("x", 1025), "at most 1024"}, {"\xff\xfe long enough!!", "UTF-8"},
		{"twelve chars", ""}, {"ünïcödé pässwörd", ""},
	} {
		got := CheckPassword("ann@example.com", tc.pw)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckPassword(%q) = %q, want %q", tc.pw, got, tc.want)
		}
	}
}

func TestNormalizeEmail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ann@Example.com", "ann@example.com"}, {"ann@example.com", "ann@example.com"},
		{"", ""}, {"ann", ""}, {"Ann <ann@example.com>", ""}, {"ann@", ""}, {"a b@example.com", ""},
		{" ann@example.com", ""}, {strings.Repeat("a", 250) + "@example.com", ""},
	} {
		if got, ok := NormalizeEmail(tc.in); got != tc.want || ok != (tc.want != "") {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// Attempts beyond the burst are refused, per email and per IP; a refused
// attempt takes nothing from the other bucket; buckets refill with time.
func TestLimiterPerEmailAndIP(t *testing.T) {
	l := NewLimiter()
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for i := range EmailBurst {
		if !l.Allow("ann@example.com", "10.0.0.1", now) {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
	}
	if l.Allow("ann@example.com", "10.0.0.2", now) {
		t.Fatal("an attempt beyond the email's burst, from another IP, was allowed")
	}
	if !l.Allow("bob@example.com", "10.0.0.1", now) {
		t.Fatal("another email from the same IP was refused before the IP's burst")
	}
	if l.Allow("ann@example.com", "10.0.0.1", now.Add(EmailInterval-time.Second)) {
		t.Fatal("allowed before the email's bucket refilled")
	}
	if !l.Allow("ann@example.com", "10.0.0.1", now.Add(EmailInterval)) {
		t.Fatal("refused after the email's bucket refilled one attempt")
	}
	// One IP over many emails (a fresh table): IPBurst attempts in all.
	l = NewLimiter()
	allowed := 0
	for i := range 100 {
		if l.Allow(fmt.Sprintf("user%d@example.com", i), "10.0.0.1", now) {
			allowed++
		}
	}
	if allowed != IPBurst {
		t.Fatalf("one IP got %d attempts over many emails, want %d", allowed, IPBurst)
	}
}

func TestSessionTokens(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if a == b || !IsToken(a) || IsToken("dev-admin-token") || IsToken(a+"x") {
		t.Fatalf("tokens %q %q", a, b)
	}
	if TokenHash(a) == TokenHash(b) || len(TokenHash(a)) != 64 || CSRFToken(a) == CSRFToken(b) ||
		strings.Contains(TokenHash(a), CSRFToken(a)) {
		t.Fatal("hashes or CSRF tokens collide or leak each other")
	}
}

// One hash (and so one sign-in's check) costs ~44 ms on this kind of
// machine: the figure docs/back-office.md gives.
func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := HashPassword("correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}
