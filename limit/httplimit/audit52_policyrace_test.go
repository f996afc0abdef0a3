package httplimit_test

import (
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// audit52PolicyValue is the RateLimit-Policy value m sends now.
func audit52PolicyValue(m *httplimit.Middleware) string {
	h := http.Header{}
	m.SetHeaders(h, limit.Decision{Allowed: true, Policy: "p", Limit: 1, Burst: 1, Remaining: 1})
	return h.Get("RateLimit-Policy")
}

// Finding: RateLimit-Policy's w is "the time to refill it from empty as
// the limiter holds it (ceil(burst/rate) for an exact policy, a little
// more for an inexact one of package limit ...)" (doc.go, Answers), and
// SetHeaders says the field has the policies "as the limiter has them
// now: SetLimit and SetBurst show in the next answer".
//
// Every(999ms) is held inexactly: burst 10000 refills in 10000 s
// (w=10000), burst 9999 in 9999 s (w=9999); ceil(burst/rate) would say
// 9990. When SetBurst runs between policyValue's two reads
// (m.l.Policies() and refillsOf(m.l)), announcedFor finds the refill was
// read for another policy and silently drops it, announcing
// ceil(burst/rate) alone (w=9990 for q=10000 or q=9999: 10 s or 9 s
// short of the refill the limiter enforces), and policyValue caches that value (middleware.go
// announcedFor/policyValue). Any answer in that window tells its client
// a window that no policy the limiter ever held has; and if the limiter
// is back at that policy when the value is stored, every later answer
// keeps the short w until the policy changes again.
//
// Expected: every RateLimit-Policy value is one the limiter announces
// for one of its two policies (w=10000 or w=9999). The test flips
// SetBurst between 10000 and 9999 while three goroutines read the field,
// for at most 3 s, and fails on the first other value. (Fixed:
// policyValue reads the pair again when it is torn and caches only a
// matching one; before, it failed within 0.01-0.94 s in every run.)
func TestAudit52FixedPolicyWindowDropsRefillUnderSetBurst(t *testing.T) {
	l := limit.MustNew(limit.Every(999*time.Millisecond), 10000, limit.WithName("p"))
	m, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]bool{}
	v1 := audit52PolicyValue(m)
	if err := l.SetBurst(9999); err != nil {
		t.Fatal(err)
	}
	v2 := audit52PolicyValue(m)
	if err := l.SetBurst(10000); err != nil {
		t.Fatal(err)
	}
	if v1 != `"p";q=10000;w=10000` || v2 != `"p";q=9999;w=9999` {
		t.Fatalf("single-threaded values %q and %q; want w=10000 and w=9999 (the refill)", v1, v2)
	}
	good[v1], good[v2] = true, true
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))

	var stop atomic.Bool
	var bad atomic.Pointer[string]
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if v := audit52PolicyValue(m); !good[v] {
					bad.CompareAndSwap(nil, &v)
					stop.Store(true)
				}
				reads.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	flips := 0
	for !stop.Load() && time.Now().Before(deadline) {
		_ = l.SetBurst(9999)
		_ = l.SetBurst(10000)
		flips += 2
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Errorf("RateLimit-Policy %s after %d SetBurst flips and %d reads; want %s or %s: w=9990 is ceil(burst x 0.999 s) without the refill (10000 s or 9999 s) the limiter holds either policy with (doc.go: w is \"the time to refill it from empty as the limiter holds it\")",
			*v, flips, reads.Load(), v1, v2)
	} else {
		t.Logf("no wrong value in %d flips and %d reads", flips, reads.Load())
	}
}
