package limit_test

// Audit 88 (snapshots and merge): a limiter's decoder on hostile input,
// with every checksum repaired (the limiter header's, each count-min
// generation's, the rotator's and the bucket snapshot's), so that mutated
// cells, lines, ages, instants and deadlines reach the decoder's checks.
//
// Contract: limit/persist.go ReadFrom (a typed error, the limiter left
// empty, as built), docs/snapshots.md (a restore is "the saved one after
// an idle time equal to the downtime"; WriteTo fails with ErrTakeAgain
// only when the clock jumps during the encode or a Period ends), and the
// round trip: whatever a limiter accepted, its own snapshot restores to
// a limiter that decides exactly as it does.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

var a88Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// a88FuzzCases: a small Buckets limiter and a small count-min one (one
// level of 8 cells, 2 generations: each generation's sketch snapshot is
// 88 + 8*8 + 4 bytes).
var a88FuzzCases = []struct {
	name string
	opts []limit.Option
	gens int // count-min generations; 0 for Buckets
	gen  int // a generation's snapshot size
}{
	{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(10, 0.2)}, 0, 0},
	{"countmin", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(1, 8)}, 2, 88 + 64 + 4},
}

func a88FixAll(b []byte, which int) {
	le := binary.LittleEndian
	if len(b) < 64 {
		return
	}
	le.PutUint32(b[60:], crc32.Checksum(b[:60], a88Castagnoli))
	c := a88FuzzCases[which]
	for i := range c.gens {
		lo, hi := 64+56+i*c.gen, 64+56+(i+1)*c.gen
		if hi > len(b) {
			break
		}
		le.PutUint32(b[hi-4:], crc32.Checksum(b[lo:hi-4], a88Castagnoli))
	}
	if len(b) >= 68 {
		le.PutUint32(b[len(b)-4:], crc32.Checksum(b[64:len(b)-4], a88Castagnoli))
	}
}

const a88FuzzT0 = 1_795_000_000_000

// FuzzAudit88SnapLimiterChain: any input, its checksums repaired or not,
// restored into a fresh limiter: refused means a typed error and every
// key at its burst; accepted means every key within [burst - MaxDebt,
// burst], the limiter snapshots again on the same (frozen) clock without
// ErrTakeAgain, and that snapshot restores into a third limiter that
// reads and decides exactly as the second, call by call.
func FuzzAudit88SnapLimiterChain(f *testing.F) {
	for i, c := range a88FuzzCases {
		clk := limittest.NewFakeClock()
		clk.Set(a88FuzzT0 - 700)
		l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(3)}, c.opts...)...)
		if err != nil {
			f.Fatal(err)
		}
		for k := range 30 {
			l.AllowN(clk.Now(), fmt.Sprint("k", k), 1+k%20)
			clk.Advance(time.Duration(k) * time.Millisecond)
		}
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		s := buf.Bytes()
		f.Add(s, uint8(i), false)
		f.Add(s, uint8(i), true)
		for _, off := range []int{64 + 8, 64 + 40, 64 + 56 + 72, 64 + 56 + 88 + 4, len(s) - 12, len(s) - 20} {
			m := bytes.Clone(s)
			m[off] ^= 0x81
			f.Add(m, uint8(i), true)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fix bool) {
		w := int(which) % len(a88FuzzCases)
		c := a88FuzzCases[w]
		if fix {
			data = bytes.Clone(data)
			a88FixAll(data, w)
		}
		clk := limittest.NewFakeClock()
		clk.Set(a88FuzzT0 + 250)
		mk := func(seed uint64) *limit.Limiter {
			l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		l1 := mk(8)
		_, err := l1.ReadFrom(bytes.NewReader(data))
		keys := make([]string, 30)
		for k := range keys {
			keys[k] = fmt.Sprint("k", k)
		}
		if err != nil {
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("untyped error: %v", err)
			}
			for _, k := range keys {
				if tok := l1.TokensAt(clk.Now(), k); tok != 20 {
					t.Fatalf("refused (%v), but %s has %v tokens, not the burst 20", err, k, tok)
				}
			}
			return
		}
		for _, k := range keys {
			if tok := l1.TokensAt(clk.Now(), k); tok > 20 || tok < 20-l1.MaxDebt() {
				t.Fatalf("%s has %v tokens, outside [burst - MaxDebt, burst]", k, tok)
			}
		}
		var again bytes.Buffer
		if _, err := l1.WriteTo(&again); err != nil {
			t.Fatalf("an accepted restore does not snapshot again on a frozen clock: %v", err)
		}
		l2 := mk(9)
		if _, err := l2.ReadFrom(&again); err != nil {
			t.Fatalf("the restored limiter's own snapshot is refused: %v", err)
		}
		for _, k := range keys {
			if a, b := l1.TokensAt(clk.Now(), k), l2.TokensAt(clk.Now(), k); a != b {
				t.Fatalf("%s: %v tokens in the restored limiter, %v after a second save and restore", k, a, b)
			}
		}
		for step := range 90 {
			k := keys[(step*7)%len(keys)]
			n := 1 + step%4
			a, b := l1.DecideN(clk.Now(), k, n), l2.DecideN(clk.Now(), k, n)
			if a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.RetryAfter != b.RetryAfter || a.ResetAfter != b.ResetAfter {
				t.Fatalf("step %d %s n=%d: %+v vs %+v after a second save and restore", step, k, n, a, b)
			}
			clk.Advance(time.Duration(step%5) * 9 * time.Millisecond)
		}
	})
}
