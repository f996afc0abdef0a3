package limit_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// PeekN "debits nothing, not even RejectCost ... it never writes a cell"
// (decision.go), and Tokens/TokensAt "only read": a snapshot of the
// engine (its cells or lines, with their times) taken before a burst of
// reads at the same instant equals one taken after, on both engines, for
// the Limiter's and a Tier's Peeks, n above the burst included, with a
// RejectCost configured, and over a table past its capacity (evictions
// and floors in play on Buckets).
func TestAudit78PeekNeverWrites(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a78Start)
			opts := a78Opts(clk, e, 7, limit.WithRejectCost(2), limit.WithMaxDebt(40), limit.WithCapacity(200, 0.01))
			l := limit.MustNew(10, 5, opts...)
			tr, err := l.Tier("slow", 2.5, 5)
			if err != nil {
				t.Fatal(err)
			}
			now := clk.Now()
			for i := range 3000 {
				l.AllowN(now, fmt.Sprintf("k%d", i), 1+i%5)
				if i%3 == 0 {
					l.AllowN(now, fmt.Sprintf("k%d", i), 4) // some denials, RejectCost
				}
			}
			snap := func() []byte {
				var b bytes.Buffer
				if _, err := l.WriteTo(&b); err != nil {
					t.Fatal(err)
				}
				return b.Bytes()
			}
			before := snap()
			for i := range 6000 {
				k := fmt.Sprintf("k%d", i)
				l.PeekN(now, k, 1+i%7)
				tr.PeekN(now, k, 1+i%6)
				l.Peek(k)
				tr.Peek(k)
				l.TokensAt(now, k)
				tr.Tokens(k)
			}
			_ = l.Stats()
			if after := snap(); !bytes.Equal(before, after) {
				n := 0
				for i := range before {
					if before[i] != after[i] {
						n++
					}
				}
				t.Errorf("snapshot changed by reads only: %d of %d bytes differ (PeekN: \"it never writes a cell\")", n, len(before))
			}
		})
	}
}
