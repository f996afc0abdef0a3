package limit_test

// Audit 134: which limiter configuration fields a restore compares.
//
// Contract: docs/snapshots.md "Limiters and meters" ("Every field must
// match the restoring limiter's bit for bit (else ErrSnapshotMismatch,
// naming the field)" over unit, drain, MaxDebt, flags (conservative
// update), size, Generations, Period; "a restore adopts the snapshot's
// seed: the restoring process builds the limiter ... with the same
// configuration and any seed"); "Guarantees" (against the receiver: "hash
// kind, seed and fingerprint"; "The fingerprint checks a custom hasher
// too"); the bucket snapshot ("the hasher kind, the seed and the hasher's
// fingerprint under it"). A refused snapshot leaves the limiter unchanged
// ("unchanged, when the header is refused").
//
// Checked on both engines: another seed, strictness, prefetch or an explicit SipHash (the default) is taken
// (and the restored limiter answers as the saved one); another hasher
// (XXH3, a custom one), conservative update, Generations, Period,
// size or capacity is refused as ErrSnapshotMismatch, with the receiver's
// own debt left as it was.

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

type a134Fnv struct{ seed uint64 }

func (h a134Fnv) Sum64(b []byte) uint64 {
	f := fnv.New64a()
	f.Write(b)
	return f.Sum64() ^ h.seed*0x9e3779b97f4a7c15
}
func (h a134Fnv) Sum64String(s string) uint64 { return h.Sum64([]byte(s)) }

func a134FnvFactory(seed uint64) sketch.Hasher { return a134Fnv{seed} }

func TestAudit134LimiterRestoreFields(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_780_000_000_000)
	base := func(e limit.Engine) []limit.Option {
		o := []limit.Option{limit.WithClock(clk), limit.WithEngine(e), limit.WithCapacity(2000, 0.01)}
		if e == limit.CountMin {
			o = append(o, limit.WithPeriod(30*time.Second))
		}
		return o
	}
	type variant struct {
		name  string
		extra []limit.Option
		ok    bool
		only  limit.Engine // 0: both engines
	}
	variants := []variant{
		{"same", nil, true, 0},
		{"seed", []limit.Option{limit.WithSeed(12345)}, true, 0},
		{"strict-off", []limit.Option{limit.WithStrict(false)}, true, 0},
		{"prefetch-off", []limit.Option{limit.WithPrefetch(false)}, true, 0},
		{"siphash-default", []limit.Option{limit.WithHasher(sketch.SipHash())}, true, 0},
		{"xxh3", []limit.Option{limit.WithHasher(sketch.XXH3())}, false, 0},
		{"custom-hasher", []limit.Option{limit.WithHasher(a134FnvFactory)}, false, 0},
		{"capacity", []limit.Option{limit.WithCapacity(4000, 0.01)}, false, 0},
		{"conservative", []limit.Option{limit.WithConservativeUpdate(true)}, false, limit.CountMin},
		{"generations", []limit.Option{limit.WithGenerations(3)}, false, limit.CountMin},
		{"period", []limit.Option{limit.WithPeriod(31 * time.Second)}, false, limit.CountMin},
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		src, err := limit.New(100, 1000, base(e)...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			src.AllowN(clk.Now(), fmt.Sprint("k", i), 10+i*7)
		}
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snap := buf.Bytes()
		for _, v := range variants {
			if v.only != 0 && v.only != e {
				continue
			}
			t.Run(e.String()+"/"+v.name, func(t *testing.T) {
				dst, err := limit.New(100, 1000, append(base(e), v.extra...)...)
				if err != nil {
					t.Fatal(err)
				}
				if dst.Engine() != e {
					t.Fatalf("engine %v, want %v", dst.Engine(), e)
				}
				dst.AllowN(clk.Now(), "own", 500)
				ownBefore := dst.TokensAt(clk.Now(), "own")
				_, err = dst.ReadFrom(bytes.NewReader(snap))
				if v.ok {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					for i := range 50 {
						k := fmt.Sprint("k", i)
						if got, want := dst.TokensAt(clk.Now(), k), src.TokensAt(clk.Now(), k); got != want {
							t.Fatalf("%s: restored %v tokens, saved limiter has %v", k, got, want)
						}
					}
					return
				}
				if !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("ReadFrom = %v, want ErrSnapshotMismatch", err)
				}
				if got := dst.TokensAt(clk.Now(), "own"); got != ownBefore {
					t.Fatalf("a refused restore changed the receiver: own key %v tokens, was %v", got, ownBefore)
				}
			})
		}
	}
}
