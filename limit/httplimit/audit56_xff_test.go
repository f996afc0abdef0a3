package httplimit_test

import (
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

// docs/migrating.md (audits 49-51): "httplimit split the whole
// X-Forwarded-For header (33.5 MB allocated for 1 MiB of commas with
// `WithTrustedProxies`) | scanned from the right, no allocation".
// RemoteIP with 2 trusted proxies allocates as much for a 1 MiB header
// as for a short one (only the key string).
func TestAudit56ForwardedForScanAllocs(t *testing.T) {
	key := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	bytesPer := func(xff string) (uint64, string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Forwarded-For", xff)
		k, err := key(r)
		if err != nil {
			t.Fatalf("key: %v", err)
		}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		for range 20 {
			key(r)
		}
		runtime.ReadMemStats(&b)
		return (b.TotalAlloc - a.TotalAlloc) / 20, k
	}
	small, k1 := bytesPer("198.51.100.1, 203.0.113.7, 10.0.0.1")
	big, k2 := bytesPer(strings.Repeat(",", 1<<20) + "198.51.100.1, 203.0.113.7, 10.0.0.1")
	if k1 != "203.0.113.7/32" || k2 != k1 {
		t.Errorf("keys %q, %q, want 203.0.113.7/32 (the 2nd from the right)", k1, k2)
	}
	if big > small+4096 {
		t.Errorf("a 1 MiB X-Forwarded-For allocates %d bytes a request against %d for a short one; migrating.md: no allocation", big, small)
	}
}
