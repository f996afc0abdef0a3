package httplimit_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a141CountingBody counts the bytes the client's transport read from it.
type a141CountingBody struct {
	r io.Reader
	n *atomic.Int64
}

func (b a141CountingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// Expect: 100-continue (an interim 1xx the server sends when the handler
// reads the body): a denied upload gets its 429 with the fields before
// the client sends the body (the middleware never reads it), over
// HTTP/1.1 and HTTP/2; an admitted one is uploaded and read whole.
func TestAudit141ExpectContinueDeniedBeforeUpload(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithName("p"), limit.WithClock(clk))
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Repeat("r", int(n%10)))
	}), httplimit.WithKey(httplimit.Header("K")))
	const size = 1 << 20
	for _, s := range a141Servers(t, h) {
		tr := s.client.Transport.(*http.Transport)
		tr.ExpectContinueTimeout = 10 * time.Second
		for i, want := range []int{200, 429} {
			var sent atomic.Int64
			req, _ := http.NewRequest("POST", s.srv.URL, a141CountingBody{strings.NewReader(strings.Repeat("b", size)), &sent})
			req.ContentLength = size
			req.Header.Set("Expect", "100-continue")
			req.Header.Set("K", s.name)
			start := time.Now()
			res, err := s.client.Do(req)
			if err != nil {
				t.Fatalf("%s %d: %v", s.name, i, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != want || res.Header.Get("RateLimit") != `"p";r=0;t=1` {
				t.Errorf("%s %d: %d %q", s.name, i, res.StatusCode, res.Header.Get("RateLimit"))
			}
			if want == 200 && sent.Load() != size {
				t.Errorf("%s: admitted upload sent %d of %d bytes", s.name, sent.Load(), size)
			}
			if want == 429 {
				if sent.Load() != 0 || time.Since(start) > 5*time.Second || res.Header.Get("Retry-After") != "1" {
					t.Errorf("%s: denied upload sent %d bytes, in %v, Retry-After %q", s.name, sent.Load(), time.Since(start), res.Header.Get("Retry-After"))
				}
			}
		}
	}
}
