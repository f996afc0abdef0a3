package limit_test

// Audit 84: a limiter's snapshot and restore, against the exact token
// bucket. A client throttled before the snapshot must stay throttled
// after the restore: never admitted earlier than the exact bucket allows
// over the wall time since the snapshot (none when the restoring clock
// reads earlier), at every gap (0, 1 ms, a refill's edge, an hour, three
// years, a clock an hour behind), on both engines; and the restored
// limiter decides as the never-stopped one at the same time.
// Damaged snapshots: a typed error, never a panic, the limiter empty as
// built. Concurrent Allow during WriteTo: every admission completed
// before WriteTo began is in the snapshot.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit84snapT0 = int64(1_700_000_000_000)

func audit84snapEngines() []limit.Engine { return []limit.Engine{limit.Buckets, limit.CountMin} }

func audit84snapNew(t testing.TB, e limit.Engine, clk sketch.Clock, extra ...limit.Option) *limit.Limiter {
	t.Helper()
	// A fixed seed (extra may set another): with crypto/rand's, a fresh
	// key's fingerprint twin in the Buckets engine (a 1% innocent-denial
	// sizing) made a run fail now and then (stop 56, under qemu arm64).
	opts := append([]limit.Option{limit.WithSeed(1), limit.WithEngine(e), limit.WithClock(clk), limit.WithSize(4, 4096)}, extra...)
	if e == limit.Buckets {
		opts = append([]limit.Option{limit.WithSeed(1), limit.WithEngine(e), limit.WithClock(clk), limit.WithCapacity(2000, 0.01)}, extra...)
	}
	l, err := limit.New(10, 5, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// audit84snapBucket is the exact token bucket (rate per second, burst).
type audit84snapBucket struct {
	rate, burst, tokens float64
	at                  int64 // ms
}

func (b *audit84snapBucket) advance(ms int64) {
	if ms > b.at {
		b.tokens = math.Min(b.burst, b.tokens+b.rate*float64(ms-b.at)/1000)
		b.at = ms
	}
}

func (b *audit84snapBucket) allow(ms int64) bool {
	b.advance(ms)
	if b.tokens >= 1-1e-9 {
		b.tokens--
		return true
	}
	return false
}

// TestAudit84SnapThrottledStaysThrottled: keys that used 5, 4, 3 and 1 of
// their burst of 5 (at 10/s) are saved, restored after each gap on a
// fresh clock, then probed every 7 ms for 1.4 s. Every admission must be
// one the exact bucket allows (on the restoring clock's elapsed time,
// plus the wall gap when positive), and every decision must equal the
// never-stopped twin's at the same wall time (limit doc, "Saving and
// restoring": "the restored limiter decides as the never-stopped one
// would at the same wall time").
func TestAudit84SnapThrottledStaysThrottled(t *testing.T) {
	gaps := []time.Duration{0, time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 101 * time.Millisecond,
		450 * time.Millisecond, time.Hour, 3 * 365 * 24 * time.Hour, -time.Millisecond, -time.Hour}
	used := map[string]int{"a": 5, "b": 4, "c": 3, "d": 1, "e": 5}
	for _, e := range audit84snapEngines() {
		for _, gap := range gaps {
			t.Run(fmt.Sprintf("%v/%v", e, gap), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84snapT0)
				src := audit84snapNew(t, e, clk)
				bk := map[string]*audit84snapBucket{}
				for k, n := range used {
					bk[k] = &audit84snapBucket{rate: 10, burst: 5, tokens: 5, at: clk.NowMillis()}
					for i := range n {
						if !src.Allow(k) || !bk[k].allow(clk.NowMillis()) {
							t.Fatalf("%s: take %d refused", k, i)
						}
					}
				}
				// "e" used its burst 37 ms before the others' snapshot.
				clk.Advance(37 * time.Millisecond)
				for k := range bk {
					bk[k].advance(clk.NowMillis())
				}
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				T := clk.NowMillis()

				rclk := sketchtest.NewFakeClock()
				rclk.Set(T + gap.Milliseconds())
				dst := audit84snapNew(t, e, rclk, limit.WithSeed(99))
				if _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
					t.Fatal(err)
				}
				// The exact bucket counts the wall gap when positive, and
				// the restoring clock's elapsed time from then on.
				shift := max(gap.Milliseconds(), 0)
				for k := range bk {
					bk[k].advance(T + shift)
				}
				// The never-stopped twin, advanced to the same wall time
				// (for a clock behind, to T: no downtime).
				clk.Set(T + shift)
				for step := range 200 {
					for _, k := range []string{"a", "b", "c", "d", "e"} {
						got := dst.Allow(k)
						twin := src.Allow(k)
						exact := bk[k].allow(T + shift + int64(step)*7)
						if got && !exact {
							t.Fatalf("step %d (+%d ms): %s admitted, earlier than the exact bucket allows", step, step*7, k)
						}
						if got != twin {
							t.Fatalf("step %d (+%d ms): %s restored %v, never-stopped twin %v", step, step*7, k, got, twin)
						}
						if got != exact {
							t.Fatalf("step %d (+%d ms): %s restored %v, exact bucket %v", step, step*7, k, got, exact)
						}
					}
					rclk.Advance(7 * time.Millisecond)
					clk.Advance(7 * time.Millisecond)
				}
			})
		}
	}
}

// TestAudit84SnapRestoreTokensNeverAboveExact: for 300 keys with debts of
// every size, Tokens after a restore at several gaps is never above the
// exact bucket's (a collision may only lower it on CountMin).
func TestAudit84SnapRestoreTokensNeverAboveExact(t *testing.T) {
	for _, e := range audit84snapEngines() {
		for _, gap := range []time.Duration{0, 50 * time.Millisecond, 333 * time.Millisecond, 2 * time.Second, -time.Hour} {
			t.Run(fmt.Sprintf("%v/%v", e, gap), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84snapT0)
				src := audit84snapNew(t, e, clk)
				bk := map[string]*audit84snapBucket{}
				for i := range 300 {
					k := fmt.Sprint("key-", i)
					bk[k] = &audit84snapBucket{rate: 10, burst: 5, tokens: 5, at: clk.NowMillis()}
					for range i % 6 {
						if src.Allow(k) != bk[k].allow(clk.NowMillis()) {
							t.Fatalf("%s: the limiter and the exact bucket disagree before the snapshot", k)
						}
					}
					clk.Advance(time.Millisecond)
				}
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				T := clk.NowMillis()
				rclk := sketchtest.NewFakeClock()
				rclk.Set(T + gap.Milliseconds())
				dst := audit84snapNew(t, e, rclk)
				if _, err := dst.ReadFrom(&buf); err != nil {
					t.Fatal(err)
				}
				for k, b := range bk {
					b.advance(T + max(gap.Milliseconds(), 0))
					if got := dst.Tokens(k); got > b.tokens+1e-9 {
						t.Fatalf("%s: %v tokens after the restore, the exact bucket has %v", k, got, b.tokens)
					}
				}
			})
		}
	}
}

// TestAudit84SnapDamagedLimiterSnapshot flips one bit of every byte and
// truncates at every length (sampled), into a freshly built limiter: a
// typed error (or, for a flip the checksums cannot see, none), never a
// panic, and on error the limiter empty, as built (limit doc: "either way
// the limiter is left empty, as built").
func TestAudit84SnapDamagedLimiterSnapshot(t *testing.T) {
	for _, e := range audit84snapEngines() {
		t.Run(e.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			mk := func() *limit.Limiter {
				if e == limit.Buckets {
					l, err := limit.New(10, 5, limit.WithEngine(e), limit.WithClock(clk), limit.WithCapacity(64, 0.01))
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				l, err := limit.New(10, 5, limit.WithEngine(e), limit.WithClock(clk), limit.WithSize(2, 16), limit.WithGenerations(2))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			src := mk()
			keys := []string{"p", "q", "r", "s", "t"}
			for i, k := range keys {
				for range i + 1 {
					src.Allow(k)
				}
			}
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			snap := buf.Bytes()
			fresh := mk()
			freshTokens := map[string]float64{}
			for _, k := range keys {
				freshTokens[k] = fresh.Tokens(k)
			}
			emptyAsBuilt := func(l *limit.Limiter) bool {
				for _, k := range keys {
					if l.Tokens(k) != freshTokens[k] {
						return false
					}
				}
				return true
			}
			try := func(what string, data []byte, mustFail bool) {
				t.Helper()
				dst := mk()
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s: ReadFrom panicked: %v", what, p)
						}
					}()
					_, err = dst.ReadFrom(bytes.NewReader(data))
				}()
				if err == nil {
					if mustFail {
						t.Fatalf("%s: accepted", what)
					}
					return
				}
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("%s: untyped error %v", what, err)
				}
				if !emptyAsBuilt(dst) {
					t.Fatalf("%s: refused (%v), and the limiter is not empty as built", what, err)
				}
				// And it still works as a fresh limiter would.
				for range 5 {
					if !dst.Allow("fresh-key") {
						t.Fatalf("%s: refused, and a fresh key is denied its burst", what)
					}
				}
			}
			// Every byte of the headers, then a sample of the body.
			for pos := 0; pos < len(snap); pos += (1 + 8*min(1, pos/200)) * testsize.Sample(1, 1, 3) {
				data := bytes.Clone(snap)
				data[pos] ^= 1 << (pos % 8)
				try(fmt.Sprintf("byte %d flipped", pos), data, false)
			}
			step := max(1, len(snap)/120)
			for n := 0; n < len(snap); n += step {
				try(fmt.Sprintf("truncated to %d of %d", n, len(snap)), snap[:n], true)
			}
			r := bytes.NewReader(append(bytes.Clone(snap), 7))
			dst := mk()
			if n, err := dst.ReadFrom(r); err != nil || n != int64(len(snap)) || r.Len() != 1 {
				t.Fatalf("a trailing byte: ReadFrom = %d, %v, left %d", n, err, r.Len())
			}
			// An empty reader: typed, unwraps to io.ErrUnexpectedEOF.
			if _, err := mk().ReadFrom(bytes.NewReader(nil)); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("empty input: %v", err)
			}
		})
	}
}

// TestAudit84SnapConcurrentAllow: writers take tokens (clock frozen, so
// nothing drains) while WriteTo runs; every admission completed before
// WriteTo began must be in the snapshot: the restored key has at most
// burst - admitted tokens (limit doc, "Consistency": "every key's
// restored debt is at least its debt when its cells were read").
func TestAudit84SnapConcurrentAllow(t *testing.T) {
	for _, e := range audit84snapEngines() {
		t.Run(e.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			mk := func(c sketch.Clock) *limit.Limiter {
				size := limit.WithSize(4, 1024)
				if e == limit.Buckets {
					size = limit.WithCapacity(500, 0.01)
				}
				l, err := limit.New(20, 400, limit.WithEngine(e), limit.WithClock(c), size)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			src := mk(clk)
			const writers = 4
			var admitted [writers]atomic.Int64
			var stop atomic.Bool
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := fmt.Sprint("w", w)
					for !stop.Load() {
						if src.Allow(k) {
							admitted[w].Add(1)
						}
						src.Allow(fmt.Sprint("noise", admitted[w].Load()%50))
					}
				}()
			}
			for round := range 5 {
				for admitted[0].Load() < int64(20*(round+1)) && admitted[0].Load() < 350 {
					time.Sleep(50 * time.Microsecond)
				}
				var before [writers]int64
				for w := range writers {
					before[w] = admitted[w].Load()
				}
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				dst := mk(clk)
				if _, err := dst.ReadFrom(&buf); err != nil {
					t.Fatal(err)
				}
				for w := range writers {
					if tok := dst.Tokens(fmt.Sprint("w", w)); tok > 400-float64(before[w])+1e-9 {
						t.Fatalf("round %d: w%d had %d admitted before WriteTo, restored with %v tokens of 400", round, w, before[w], tok)
					}
				}
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}
