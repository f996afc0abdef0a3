package limit_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit53FixedLimiterSnapshotAcrossDeadline (fixed: WriteTo fails when the set is promoted during the encode;
// the restore never holds a set older than the writes): the count-min
// limiter's twin of the meter findings (same cause: the rotator's WriteTo
// encodes the generation set of its start). A limiter of 10/s, burst 10,
// CountMin with its shortest Period (2 s: MaxDebt / rate), is saved at
// +1990 ms, 10 ms before its first rotation deadline; during the encode
// (after the limiter's and the rotator's headers) the clock reaches +3900
// ms and k spends its burst there (10 admitted). Restored at +3900 ms,
// the limiter denies k as the never-saved one does; but at +4000 ms, one
// Period after the deadline, the restored limiter's primary is the
// generation it built at the restore, with none of that debt: it admits
// all 10 of k's requests, where the never-saved limiter, whose primary
// holds the debt (spent 100 ms before), admits 1. limit/persist.go, ReadFrom: "Every debt has drained by
// the time elapsed since the snapshot"; the brief's rule: a snapshot
// under a moving clock fails or restores at or above the truth.
func TestAudit53FixedLimiterSnapshotAcrossDeadline(t *testing.T) {
	const t0 = 1_700_000_000_000
	clk := sketchtest.NewFakeClock()
	clk.Set(t0)
	mk := func(c *sketchtest.FakeClock, seed uint64) *limit.Limiter {
		l, err := limit.New(10, 10, limit.WithEngine(limit.CountMin), limit.WithClock(c), limit.WithSeed(seed),
			limit.WithSize(3, 1024), limit.WithPeriod(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	orig := mk(clk, 53)
	clk.Set(t0 + 1990) // the first deadline is at +2000
	var buf bytes.Buffer
	admitted := 0
	_, err := orig.WriteTo(&testhook.Writer{W: &buf, N: 2, Hook: func() {
		clk.Set(t0 + 3900)
		for range 10 {
			if orig.Allow("k") {
				admitted++
			}
		}
	}})
	if err != nil {
		t.Logf("WriteTo failed (%v): the documented refusal", err)
		return
	}
	rc := sketchtest.NewFakeClock()
	rc.Set(t0 + 3900)
	rest := mk(rc, 1)
	if _, err := rest.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	t.Logf("admitted %d during the encode", admitted)
	for _, at := range []int64{3900, 3999, 4000, 4050} {
		clk.Set(t0 + at)
		rc.Set(t0 + at)
		o, r := 0, 0
		for range 10 {
			if orig.Allow("k") {
				o++
			}
			if rest.Allow("k") {
				r++
			}
		}
		if r > o {
			t.Errorf("at +%d ms (a debt of 10 spent at +3900, during the encode): restored limiter admitted %d of 10 for k, the never-saved one %d "+
				"(persist.go ReadFrom: \"Every debt has drained by the time elapsed since the snapshot\")", at, r, o)
			break
		}
	}
}
