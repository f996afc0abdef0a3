package rotator_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87RotSnapshotLifetime: a rotator restored after a downtime is
// "the saved one after an idle time equal to the downtime" (snapshots.md),
// its primary retiring "after the time its deadline had left at the
// snapshot instant ... less the downtime", so the forgetting bound of
// rotator/doc.go ("a write is gone from every generation at most
// N x Period after it was made") holds in the restoring clock's time:
// N = 2 and 3, Period 1 s, a key written at T0 + 300 ms, saved at
// T0 + 700 ms, restored (MarshalBinary/UnmarshalBinary and
// WriteTo/ReadFrom) on a clock at T0 + 700 ms + downtime, for downtimes
// from 0 to a year: the restored rotator reads the key exactly when a
// never-saved twin (same Config, same Seed) left idle as long does, read
// at the restore, at T0 + N x Period - 1 ms and T0 + N x Period (the
// generations built at T0 retire) and N x Period after the write.
func TestAudit87RotSnapshotLifetime(t *testing.T) {
	const P = time.Second
	for _, n := range []uint32{2, 3} {
		for _, down := range []time.Duration{0, time.Millisecond, 299 * time.Millisecond, 300 * time.Millisecond,
			1300 * time.Millisecond, 2*P + 299*time.Millisecond, 2*P + 300*time.Millisecond, time.Hour, 365 * 24 * time.Hour} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("N=%d down=%v stream=%v", n, down, stream)
				c1 := sketchtest.NewFakeClock()
				c1.SetTime(a87T0)
				orig := a87Rot(t, c1, decay.None(), n, 1<<10, P)
				c2 := sketchtest.NewFakeClock()
				c2.SetTime(a87T0.Add(-time.Hour))
				res := a87Rot(t, c2, decay.None(), n, 1<<10, P)
				c1.SetTime(a87T0.Add(300 * time.Millisecond))
				orig.UpdateString("k", 4)
				c1.SetTime(a87T0.Add(700 * time.Millisecond))
				restoreAt := a87T0.Add(700*time.Millisecond + down)
				c2.SetTime(restoreAt)
				if stream {
					var buf bytes.Buffer
					if _, err := orig.WriteTo(&buf); err != nil {
						t.Fatalf("%s: WriteTo: %v", name, err)
					}
					if _, err := res.ReadFrom(&buf); err != nil {
						t.Fatalf("%s: ReadFrom: %v", name, err)
					}
				} else {
					data, err := orig.MarshalBinary()
					if err != nil {
						t.Fatalf("%s: MarshalBinary: %v", name, err)
					}
					if err := res.UnmarshalBinary(data); err != nil {
						t.Fatalf("%s: UnmarshalBinary: %v", name, err)
					}
				}
				c1.SetTime(restoreAt)
				for _, at := range []time.Time{restoreAt,
					a87T0.Add(time.Duration(n)*P - time.Millisecond), a87T0.Add(time.Duration(n) * P),
					a87T0.Add(300*time.Millisecond + time.Duration(n)*P)} {
					if at.Before(restoreAt) {
						continue
					}
					c1.SetTime(at)
					c2.SetTime(at)
					g, w := res.QueryString("k"), orig.QueryString("k")
					// The twin's own answer, from the model: present until
					// the youngest generation at the write (built at T0)
					// retires at T0 + N x P.
					model := 4.0
					if !at.Before(a87T0.Add(time.Duration(n) * P)) {
						model = 0
					}
					if g != w || w != model {
						t.Fatalf("%s at T0+%v: restored reads %v, never-saved twin %v, model %v", name, at.Sub(a87T0), g, w, model)
					}
				}
			}
		}
	}
}

// TestAudit87RotConfigRoundTrip: Config "returns the configuration the
// rotator was built with, defaults filled in (Clock nil if it was nil,
// Sketch.Seed the base seed)": Generations 0 reads 2, Levels 0 reads 4,
// CellsPerLevel 0 reads 100,000, Period and Seed as given, and a second
// rotator built from it on a clock moved alike hashes every key to the
// same cells in every generation it promotes and reads the same scores.
func TestAudit87RotConfigRoundTrip(t *testing.T) {
	c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	c1.SetTime(a87T0)
	c2.SetTime(a87T0)
	a, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, Seed: 0xfeed, Clock: c1}, Period: 2500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := a.Config()
	if cfg.Generations != 2 || cfg.Sketch.Levels != 4 || cfg.Sketch.CellsPerLevel != 100_000 || cfg.Sketch.Seed != 0xfeed ||
		cfg.Period != 2500*time.Microsecond || cfg.Sketch.Clock != sketch.Clock(c1) {
		t.Fatalf("Config() = %+v", cfg)
	}
	cfg.Sketch.Clock = c2
	b, err := rotator.New(cfg)
	if err != nil {
		t.Fatalf("New(Config()): %v", err)
	}
	for i := range 200 {
		k := fmt.Sprintf("k%d", i%13)
		a.UpdateString(k, float64(i%7))
		b.UpdateString(k, float64(i%7))
		da, db := a.QueryDetailed([]byte(k)), b.QueryDetailed([]byte(k))
		if fmt.Sprint(da) != fmt.Sprint(db) {
			t.Fatalf("step %d: %+v vs %+v", i, da, db)
		}
		c1.Advance(time.Millisecond)
		c2.Advance(time.Millisecond)
	}
	if a.Stats() != b.Stats() || a.Stats().Periods != 66 {
		t.Fatalf("stats %+v vs %+v; want 66 periods of 3 ms in 200 ms", a.Stats(), b.Stats())
	}
}
