package bucket

import (
	"strconv"
	"testing"
)

// TestAudit13SaturationFullLimitRequest: Saturation(n, limit) is the
// probability that a fresh key asking for n under limit is denied. On an
// empty engine that is 0 or 1, and it must agree with what a fresh key's
// TryUpdate does (measured on a twin engine): a fresh key asking for
// exactly its (whole) limit is admitted, so the reading is 0; a request
// above the limit is denied (1). Mutation audit13 M24 (c >= lim) reads 1
// for n == limit.
func TestAudit13SaturationFullLimitRequest(t *testing.T) {
	for _, law := range []Law{Linear(10, 40), Linear(1000, 2000), Linear(3, 7), None(40)} {
		e := newTest(t, 256, law, nil)
		twin := newTest(t, 256, law, nil)
		for i, c := range []struct{ n, limit float64 }{
			{20, 20}, {1, 1}, {7, 7}, {0.5, 0.5}, {21, 20}, {2, 1},
		} {
			if c.limit > law.Max {
				continue
			}
			admitted := twin.TryUpdate("fresh-"+strconv.Itoa(i), c.n, c.limit)
			want := 1.0
			if admitted {
				want = 0
			}
			if c.n <= c.limit && c.n == float64(int(c.n)) && c.limit == float64(int(c.limit)) && !admitted {
				t.Fatalf("law %v: a fresh key asking %v under %v denied (whole loads are exact)", law.Kind, c.n, c.limit)
			}
			if got := e.Saturation(c.n, c.limit); got != want {
				t.Errorf("law %v: empty engine Saturation(%v, %v) = %v; a fresh key is admitted: %v", law.Kind, c.n, c.limit, got, admitted)
			}
		}
	}
}
