package meter_test

// Audit 134: which meter configuration fields a restore compares.
//
// Contract: docs/snapshots.md "Limiters and meters" ("a restore adopts
// the snapshot's seed: the restoring process builds the limiter or meter
// with the same configuration and any seed"; the meter header holds "the
// meter: 1 Rate or 2 Novelty, the window in ns, the Period in ms");
// "Guarantees" (the receiver's "hash kind, seed and fingerprint" are
// checked; "The fingerprint checks a custom hasher too"); meter.Rate.ReadFrom
// ("either way r is left unchanged").
//
// Checked for Rate and Novelty: another seed or prefetch is taken and the
// restored meter answers as the saved one; another hasher (XXH3 where the
// saver used the default, or the other way round), size, window or
// WithPeriodWindows is refused as ErrSnapshotMismatch, with the
// receiver's own key left as it was.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit134MeterRestoreFields(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_780_000_000_000)
	type meterish interface {
		io.WriterTo
		io.ReaderFrom
	}
	type kind struct {
		name  string
		mk    func(w time.Duration, o ...meter.Option) (meterish, error)
		feed  func(m meterish, key string)
		probe func(m meterish, key string) float64
	}
	kinds := []kind{
		{"rate",
			func(w time.Duration, o ...meter.Option) (meterish, error) { return meter.NewRate(w, o...) },
			func(m meterish, k string) {
				for range 30 {
					m.(*meter.Rate).Observe(k)
				}
			},
			func(m meterish, k string) float64 { return m.(*meter.Rate).PerSecond(k) }},
		{"novelty",
			func(w time.Duration, o ...meter.Option) (meterish, error) { return meter.NewNovelty(w, o...) },
			func(m meterish, k string) { m.(*meter.Novelty).Seen(k) },
			func(m meterish, k string) float64 {
				if m.(*meter.Novelty).Contains(k) {
					return 1
				}
				return 0
			}},
	}
	base := []meter.Option{meter.WithClock(clk), meter.WithSize(3, 256)}
	variants := []struct {
		name   string
		window time.Duration
		extra  []meter.Option
		ok     bool
	}{
		{"same", time.Minute, nil, true},
		{"seed", time.Minute, []meter.Option{meter.WithSeed(98765)}, true},
		{"prefetch-off", time.Minute, []meter.Option{meter.WithPrefetch(false)}, true},
		{"xxh3", time.Minute, []meter.Option{meter.WithHasher(sketch.XXH3())}, false},
		{"siphash", time.Minute, []meter.Option{meter.WithHasher(sketch.SipHash())}, false},
		{"size", time.Minute, []meter.Option{meter.WithSize(3, 257)}, false},
		{"window", time.Minute + time.Millisecond, nil, false},
		{"period-windows", time.Minute, []meter.Option{meter.WithPeriodWindows(3)}, false},
	}
	for _, k := range kinds {
		src, err := k.mk(time.Minute, base...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			k.feed(src, fmt.Sprint("k", i))
		}
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snap := buf.Bytes()
		// One of "xxh3" and "siphash" is the default: that one is taken.
		def, err := k.mk(time.Minute, append(base, meter.WithHasher(sketch.XXH3()))...)
		if err != nil {
			t.Fatal(err)
		}
		xxh3Default := func() bool { _, err := def.ReadFrom(bytes.NewReader(snap)); return err == nil }()
		for _, v := range variants {
			t.Run(k.name+"/"+v.name, func(t *testing.T) {
				ok := v.ok
				if v.name == "xxh3" {
					ok = xxh3Default
				} else if v.name == "siphash" {
					ok = !xxh3Default
				}
				dst, err := k.mk(v.window, append(append([]meter.Option(nil), base...), v.extra...)...)
				if err != nil {
					t.Fatal(err)
				}
				k.feed(dst, "own")
				own := k.probe(dst, "own")
				_, err = dst.ReadFrom(bytes.NewReader(snap))
				if ok {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					for i := range 40 {
						key := fmt.Sprint("k", i)
						if got, want := k.probe(dst, key), k.probe(src, key); got != want {
							t.Fatalf("%s: restored %v, saved meter reads %v", key, got, want)
						}
					}
					return
				}
				if !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("ReadFrom = %v, want ErrSnapshotMismatch", err)
				}
				if got := k.probe(dst, "own"); got != own {
					t.Fatalf("a refused restore changed the meter: own key %v, was %v", got, own)
				}
			})
		}
	}
}
