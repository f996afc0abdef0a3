package httplimit_test

import (
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestForwardedForHugeHeaderAllocatesLittle: a client controls everything
// left of the trusted proxies' entries, up to net/http's 1 MiB of header;
// finding the n-th entry from the right must not cost memory in
// proportion to it (splitting every line cost 33.5 MB for a 1 MiB header
// of commas: audit 52).
func TestForwardedForHugeHeaderAllocatesLittle(t *testing.T) {
	key := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-For", strings.Repeat(",", 1<<20)+" 203.0.113.7, 10.0.0.1")
	r.Header.Add("X-Forwarded-For", "10.0.0.2")
	k, err := key(r)
	if err != nil || !strings.HasPrefix(k, "10.0.0.1") {
		t.Fatalf("key %q, %v; want the entry of the outermost trusted proxy's client, 10.0.0.1", k, err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := key(r); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 16<<10 {
		t.Errorf("a key from a 1 MiB X-Forwarded-For allocated %d bytes; want at most 16 KiB", per)
	}
}
