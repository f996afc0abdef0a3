package limit_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// a91Snap writes a snapshot of l with key "k" at its burst's debt.
func a91Snap(t *testing.T, l *limit.Limiter) []byte {
	t.Helper()
	if !l.AllowN(l.Now(), "k", l.Burst()) {
		t.Fatal("the burst was not admitted from an empty key")
	}
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// a91CheckEngineMismatch checks that ReadFrom refuses snap into l with an
// error matching sketch.ErrSnapshotMismatch that names the engines, and
// leaves l empty and usable.
func a91CheckEngineMismatch(t *testing.T, l *limit.Limiter, snap []byte, got, want limit.Engine) {
	t.Helper()
	_, err := l.ReadFrom(bytes.NewReader(snap))
	if !errors.Is(err, sketch.ErrSnapshotMismatch) || errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("ReadFrom: %v, want an error matching ErrSnapshotMismatch only", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "Engine") || !strings.Contains(msg, got.String()) || !strings.Contains(msg, want.String()) {
		t.Errorf("ReadFrom's error %q does not name the field Engine and both engines (%v, %v)", msg, got, want)
	}
	if tk := l.TokensAt(l.Now(), "k"); tk != float64(l.Burst()) {
		t.Errorf("after the refused snapshot key k holds %v tokens, want the full burst %d (left empty, as built)", tk, l.Burst())
	}
	if !l.AllowN(l.Now(), "k", l.Burst()) {
		t.Errorf("after the refused snapshot the burst is not admitted")
	}
}

// TestAudit91EngineSnapshotOldBucketsConfig: a limiter an older build put
// on Buckets (New(10, 20, WithMaxDebt(40.0001)): its engine clamped at
// MaxDebt's ticks rounded down, 60,000 of 1,500 a token, the clamp of
// MaxDebt 40) now runs on the count-min. Its old snapshot is what a
// Buckets limiter of MaxDebt 40 writes with the header's MaxDebt field
// set to 40.0001 (offset 24, CRC-32C at 60: limit/persist.go). ReadFrom
// into today's limiter of that configuration (Auto, and
// WithEngine(CountMin)) refuses it before touching the limiter, with an
// error matching ErrSnapshotMismatch naming the Engine field ("snapshot
// Engine differs: got buckets, the limiter has count-min"), and the
// limiter stays empty, as built (limit/doc.go, "Saving and restoring";
// ReadFrom's godoc); WithEngine(Buckets), the only way to get the old
// engine back, is refused by New. The unpatched snapshot restores into
// MaxDebt 40 on Buckets (still taken), the control. docs/migrating.md's
// stop-57 row for this change says "those limiters run on the
// count-min" and not that their snapshots no longer restore (rows for
// earlier such changes do: Novelty's T, a sub-ms Period).
func TestAudit91EngineSnapshotOldBucketsConfig(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(7_000_000)
	build := func(md float64, eng limit.Engine) (*limit.Limiter, error) {
		return limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(eng), limit.WithMaxDebt(md))
	}
	src, err := build(40, limit.Buckets)
	if err != nil {
		t.Fatal(err)
	}
	snap := a91Snap(t, src)
	old := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(old[24:], math.Float64bits(40.0001))
	binary.LittleEndian.PutUint32(old[60:], core.CRC32C(old[:60]))

	ctl, err := build(40, limit.Buckets)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatalf("control: %v", err)
	}
	if tk := ctl.TokensAt(ctl.Now(), "k"); tk != 0 {
		t.Fatalf("control: restored key holds %v tokens, want 0", tk)
	}
	if _, err := build(40.0001, limit.Buckets); err == nil {
		t.Fatal("WithEngine(Buckets) takes MaxDebt 40.0001 at 10/s")
	}
	for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
		t.Run(fmt.Sprint(eng), func(t *testing.T) {
			l, err := build(40.0001, eng)
			if err != nil {
				t.Fatal(err)
			}
			if l.Engine() != limit.CountMin {
				t.Fatalf("runs on %v", l.Engine())
			}
			a91CheckEngineMismatch(t, l, old, limit.Buckets, limit.CountMin)
		})
	}
	// And the other way: a count-min snapshot into a Buckets limiter.
	cm, err := build(40.0001, limit.Auto)
	if err != nil {
		t.Fatal(err)
	}
	b, err := build(40, limit.Auto)
	if err != nil {
		t.Fatal(err)
	}
	a91CheckEngineMismatch(t, b, a91Snap(t, cm), limit.CountMin, limit.Buckets)
}

// TestAudit91EngineSnapshotRejectCostChangesEngineDocumented (a finding,
// now documented in limit's "Saving and restoring": a change that moves
// the limiter across engines is refused with ErrSnapshotMismatch naming
// Engine, the limiter left empty; asserted so):
// "The burst, RejectCost, the name and the mode are configuration, not
// state: the restoring process's apply" (limit/doc.go, "Saving and
// restoring"), yet since audit 90 Auto's engine depends on RejectCost, so
// a RejectCost changed across a restart changes the engine and ReadFrom
// refuses the snapshot: New(1000, 5) (Buckets) saved, New(1000, 5,
// WithRejectCost(0.5)) (the count-min: 0.5 token is 2978.5 ticks)
// restores it with "snapshot Engine differs: got buckets, the limiter
// has count-min" (ErrSnapshotMismatch), and the key's debt is lost; so
// do New(10, 20, WithMaxDebt(40)) and the same WithRejectCost(1e-4),
// both ways. ReadFrom's godoc lists what must match ("the engine, its
// base units (set by the limit and MaxDebt), MaxDebt, ...") without
// saying that under Auto the RejectCost picks the engine. Either the doc
// says so (RejectCost is configuration only where it keeps the engine),
// or the snapshot restores across it.
func TestAudit91EngineSnapshotRejectCostChangesEngineDocumented(t *testing.T) {
	for _, c := range []struct {
		lim      limit.Limit
		burst    int
		md       float64
		from, to float64
	}{{1000, 5, 0, 0, 0.5}, {10, 20, 40, 0, 1e-4}, {10, 20, 40, 1e-4, 0}} {
		t.Run(fmt.Sprintf("%v-b%d-md%v-rc%v-to-%v", c.lim, c.burst, c.md, c.from, c.to), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(7_000_000)
			build := func(rc float64) *limit.Limiter {
				opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(5), limit.WithRejectCost(rc)}
				if c.md != 0 {
					opts = append(opts, limit.WithMaxDebt(c.md))
				}
				return limit.MustNew(c.lim, c.burst, opts...)
			}
			src, dst := build(c.from), build(c.to)
			snap := a91Snap(t, src)
			_, err := dst.ReadFrom(bytes.NewReader(snap))
			if src.Engine() == dst.Engine() {
				t.Fatalf("both on %v: the case no longer moves engines", src.Engine())
			}
			if !errors.Is(err, sketch.ErrSnapshotMismatch) || !strings.Contains(err.Error(), "Engine") {
				t.Fatalf("saved with RejectCost %v (%v), restored with RejectCost %v (%v): %v; want ErrSnapshotMismatch naming Engine", c.from, src.Engine(), c.to, dst.Engine(), err)
			}
			if tk := dst.TokensAt(dst.Now(), "k"); tk != float64(c.burst) {
				t.Errorf("the refused restore left the key at %v tokens, want the empty limiter's %v", tk, c.burst)
			}
		})
	}
}
