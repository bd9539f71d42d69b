package operator

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-in rate limits (contract 13). Every attempt counts, whatever its
// outcome, against two buckets: its email's and its source IP's. An
// attempt finding either empty is refused without a password check.
//
//   - per email: 5 at once, then one every 3 minutes (20 an hour): a
//     password guesser gets ~175,000 guesses a year at one account, far
//     too few for a 12-character password, and an operator who mistypes
//     a few times waits minutes, not hours;
//   - per source IP: 20 at once, then one every 15 seconds (240 an hour),
//     which spreads the guesses of one client over many emails no faster.
const (
	EmailBurst    = 5
	EmailInterval = 3 * time.Minute
	IPBurst       = 20
	IPInterval    = 15 * time.Second
	// limiterKeysMax bounds each table: past it, buckets that are full
	// again (their key has been quiet long enough) are dropped.
	limiterKeysMax = 100_000
)

// Limiter counts sign-in attempts. It is in memory, on the node that checks
// passwords (the leader: a follower forwards sign-ins there), so attempts
// spread over every node still meet one pair of buckets; a new leader
// starts with empty tables, which gives an attacker one fresh burst per
// election, not per node. Safe for concurrent use.
type Limiter struct {
	mu     sync.Mutex
	emails keyedBuckets
	ips    keyedBuckets
}

// NewLimiter makes a Limiter with the limits above.
func NewLimiter() *Limiter { return NewLimiterWith(EmailBurst, EmailInterval, IPBurst, IPInterval) }

// NewLimiterWith makes a Limiter with other limits: bursts, and the time
// one more attempt takes to come back.
func NewLimiterWith(emailBurst int, emailEvery time.Duration, ipBurst int, ipEvery time.Duration) *Limiter {
	return &Limiter{
		emails: keyedBuckets{every: emailEvery, burst: emailBurst},
		ips:    keyedBuckets{every: ipEvery, burst: ipBurst},
	}
}

// Allow takes one attempt from email's and ip's buckets at now, or none and
// false when either is empty.
func (l *Limiter) Allow(email, ip string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, i := l.emails.get(email, now), l.ips.get(ip, now)
	if e.TokensAt(now) < 1 || i.TokensAt(now) < 1 {
		return false
	}
	e.AllowN(now, 1)
	i.AllowN(now, 1)
	return true
}

type keyedBuckets struct {
	every time.Duration
	burst int
	m     map[string]*rate.Limiter
}

func (k *keyedBuckets) get(key string, now time.Time) *rate.Limiter {
	if k.m == nil {
		k.m = map[string]*rate.Limiter{}
	}
	if b, ok := k.m[key]; ok {
		return b
	}
	if len(k.m) >= limiterKeysMax {
		for key, b := range k.m {
			if b.TokensAt(now) >= float64(k.burst) {
				delete(k.m, key)
			}
		}
	}
	b := rate.NewLimiter(rate.Every(k.every), k.burst)
	k.m[key] = b
	return b
}
