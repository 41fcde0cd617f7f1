package mcpserver

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// requestLimiter bounds how many executions each requester may ask for:
// a token bucket per requester, refilled at perMinute and holding burst.
// Requesters are the configured tokens and the agent, so the map stays
// as small as the config.
type requestLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newRequestLimiter(perMinute, burst int) *requestLimiter {
	return &requestLimiter{
		limit:   rate.Limit(float64(perMinute) / 60),
		burst:   burst,
		buckets: map[string]*rate.Limiter{},
	}
}

// allow takes one request from who's bucket at now. When the bucket is
// empty it takes nothing and says how long until one is free.
func (l *requestLimiter) allow(who string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	b, ok := l.buckets[who]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[who] = b
	}
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Minute
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return false, wait
	}
	return true, 0
}

// seconds rounds a wait up to whole seconds, at least one, for a message.
func seconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
