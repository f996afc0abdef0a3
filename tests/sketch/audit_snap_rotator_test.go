package sketch_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func auditRotCfg(c sketch.Clock) rotator.Config {
	return rotator.Config{
		// Roomy cells: with 16 keys a key shares all 3 of its cells
		// with another about once in 10^8 generations, so a count-min
		// over-estimate cannot pass for a write the test did not make.
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 4096, Hi: 1e9, Decay: decay.Exponential(0.05), Seed: 9, Clock: c},
		Generations: 2,
		Period:      time.Second,
	}
}

func mustRot(t *testing.T, cfg rotator.Config) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAuditSnapRotatorUnderPromotions: rotator WriteTo while other
// goroutines update and the clock drives promotions: every snapshot is a
// single generation set (each generation's header seed must match the
// counter, so a mixed set would be refused), decodes, and reads no key
// above the total ever written (with cells roomy enough that no two of
// the 16 keys share all their cells: a collision is the count-min's documented
// over-estimate, not a fault of the snapshot).
func TestAuditSnapRotatorUnderPromotions(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_000_000)
	cfg := auditRotCfg(c)
	r := mustRot(t, cfg)
	keys := snapKeys(16)
	var stop, pause atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if pause.Load() {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			for _, k := range keys {
				r.Update(k, 1)
			}
			writes.Add(1)
			c.Advance(97 * time.Millisecond)
		}
	})
	for i := range 30 {
		for w0 := writes.Load(); writes.Load() < w0+3; {
			time.Sleep(time.Millisecond) // let traffic and promotions run
		}
		// A promotion during the encode refuses the snapshot (take it
		// again: docs/snapshots.md); every snapshot taken is one set.
		var data []byte
		var err error
		// After three refusals the writer pauses (at most one more
		// Advance lands), so a slow encode (the arm64 run under qemu)
		// cannot be refused for ever by a writer that outruns it.
		for try := 0; ; try++ {
			if data, err = r.MarshalBinary(); err == nil {
				break
			}
			if !strings.Contains(err.Error(), "take the snapshot again") || try >= 10000 {
				t.Fatal(err)
			}
			if try == 2 {
				pause.Store(true)
			}
		}
		pause.Store(false)
		c2 := sketchtest.NewFakeClock()
		c2.Set(c.NowMillis())
		dst := mustRot(t, auditRotCfg(c2))
		if err := dst.UnmarshalBinary(data); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		w := float64(writes.Load() + 1)
		for _, k := range keys {
			if v := dst.Query(k); v > w {
				t.Fatalf("snapshot %d key %s: %v above every write %v", i, k, v, w)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if p := r.Stats().Promotions; p < 10 {
		t.Fatalf("only %d promotions during the test", p)
	}
}

// TestAuditSnapRotatorStream: a rotator's ReadFrom reads exactly its
// bytes (a following record stays in the stream); UnmarshalBinary of the
// same bytes with a trailing byte is refused (corrupt) and changes
// nothing; a failure in the last generation leaves the rotator as it was.
func TestAuditSnapRotatorStream(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(5_000_000)
	src := mustRot(t, auditRotCfg(c))
	keys := snapKeys(10)
	for i, k := range keys {
		src.Update(k, float64(i+1))
		c.Advance(300 * time.Millisecond)
	}
	data, _ := src.MarshalBinary()
	rd := bytes.NewReader(append(bytes.Clone(data), 'X'))
	dst := mustRot(t, auditRotCfg(c))
	if n, err := dst.ReadFrom(rd); err != nil || n != int64(len(data)) || rd.Len() != 1 {
		t.Fatalf("ReadFrom: n=%d of %d, err %v, left %d", n, len(data), err, rd.Len())
	}
	for _, k := range keys {
		if dst.Query(k) != src.Query(k) {
			t.Fatalf("key %s: %v, want %v", k, dst.Query(k), src.Query(k))
		}
	}
	mine := mustRot(t, auditRotCfg(c))
	mine.Update([]byte("mine"), 5)
	before := core.RotatorOf(mine).Current()
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
		after := core.RotatorOf(mine).Current()
		if after.Next != before.Next || after.Deadline != before.Deadline || after.Gens[0] != before.Gens[0] || mine.Query([]byte("mine")) != 5 {
			t.Errorf("%s: the refused snapshot changed the rotator", name)
		}
	}
	check("trailing byte", mine.UnmarshalBinary(append(bytes.Clone(data), 0)))
	bad := bytes.Clone(data)
	bad[len(bad)-20] ^= 0x40 // a cell of the last generation
	_, err := mine.ReadFrom(bytes.NewReader(bad))
	check("last generation damaged (ReadFrom)", err)
	check("last generation damaged (UnmarshalBinary)", mine.UnmarshalBinary(bad))
	_, err = mine.ReadFrom(bytes.NewReader(data[:len(data)-2]))
	check("truncated outer checksum", err)
}

// TestAuditSnapLimiterAdoptChain: a CountMin limiter restored into one
// built with another seed adopts the snapshot's seed; after promotions
// under that seed it snapshots again and restores into a third limiter
// (yet another seed) that decides every key as the second does.
func TestAuditSnapLimiterAdoptChain(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_700_000_000_000)
	mk := func(seed uint64) *limit.Limiter {
		l, err := limit.New(limit.Limit(5), 20, limit.WithEngine(limit.CountMin), limit.WithSize(3, 256),
			limit.WithGenerations(2), limit.WithPeriod(8*time.Second), limit.WithSeed(seed), limit.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	a := mk(1)
	for i, k := range keys {
		a.AllowN(c.Now(), k, i%15+1)
	}
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := mk(2)
	if _, err := b.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	// Promotions (new generations under the adopted seed) and traffic on
	// both a and b: they stay identical.
	for step := range 40 {
		c.Advance(700 * time.Millisecond)
		for i, k := range keys {
			n := (i+step)%7 + 1
			if x, y := a.AllowN(c.Now(), k, n), b.AllowN(c.Now(), k, n); x != y {
				t.Fatalf("step %d key %s: original %v, restored %v", step, k, x, y)
			}
		}
	}
	buf.Reset()
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	d := mk(3)
	if _, err := d.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("second-generation restore: %v", err)
	}
	for _, k := range keys {
		if x, y := a.PeekN(c.Now(), k, 1), d.PeekN(c.Now(), k, 1); x != y {
			t.Fatalf("key %s: original %+v, restored twice %+v", k, x, y)
		}
	}
}
