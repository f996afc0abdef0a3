package snapshot_test

// Audit 134 (package sketch/snapshot): concatenated and duplicated
// snapshot streams, and the byte counts of WriteTo / ReadFrom.
//
// Contract: docs/snapshots.md "API" ("ReadFrom(r io.Reader) (int64,
// error) // reads exactly the snapshot's bytes"); sketch.ReadFrom
// ("reading exactly the snapshot's bytes"); limit.Limiter.ReadFrom
// ("reading exactly its bytes, and returns the bytes read"),
// meter.Rate.ReadFrom ("reading exactly its bytes"); SnapshotSize
// ("the exact length in bytes"); "A sketch snapshot is 88 + 8*L*M + 4
// bytes"; snapshot.Load ("refuses a file whose size is not the length of
// the destination's snapshot before touching it").
//
// What is checked: two snapshots written back to back into one stream
// restore one after the other through ReadFrom (the first ReadFrom does
// not read into the second), over a plain reader and a one-byte reader;
// each ReadFrom returns exactly the length WriteTo returned, which is
// SnapshotSize (and 88+8LM+4 for a sketch); a file holding a snapshot
// twice is refused by Load with ErrCorruptSnapshot, the destination left
// empty.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// audit134Pair is one kind of snapshot: a source fed with two keys, a
// fresh destination of the same configuration, and a probe reading a key.
type audit134Pair struct {
	name  string
	src   func(t *testing.T, n int) (io.WriterTo, int64) // n selects the data; size
	dst   func(t *testing.T) audit134Dst
	probe func(d audit134Dst, key string) float64
}

type audit134Dst interface {
	io.ReaderFrom
}

func audit134Clock() *sketchtest.FakeClock {
	c := sketchtest.NewFakeClock()
	c.Set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func audit134Pairs(clock *sketchtest.FakeClock) []audit134Pair {
	scfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(1e-6), Clock: clock}
	rcfg := rotator.Config{Sketch: scfg, Generations: 3, Period: time.Hour}
	lim := func(e limit.Engine) func() (*limit.Limiter, error) {
		return func() (*limit.Limiter, error) {
			return limit.New(100, 1000, limit.WithEngine(e), limit.WithClock(clock), limit.WithCapacity(1000, 0.01))
		}
	}
	var pairs []audit134Pair
	pairs = append(pairs, audit134Pair{
		name: "sketch",
		src: func(t *testing.T, n int) (io.WriterTo, int64) {
			s, err := sketch.New(scfg)
			if err != nil {
				t.Fatal(err)
			}
			s.UpdateString("a", float64(10*n))
			return s, 88 + 8*3*64 + 4
		},
		dst: func(t *testing.T) audit134Dst {
			s, err := sketch.New(scfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		probe: func(d audit134Dst, k string) float64 { return d.(*sketch.Sketch).QueryString(k) },
	})
	pairs = append(pairs, audit134Pair{
		name: "rotator",
		src: func(t *testing.T, n int) (io.WriterTo, int64) {
			r, err := rotator.New(rcfg)
			if err != nil {
				t.Fatal(err)
			}
			r.UpdateString("a", float64(10*n))
			return r, 56 + 3*(88+8*3*64+4) + 4
		},
		dst: func(t *testing.T) audit134Dst {
			r, err := rotator.New(rcfg)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		probe: func(d audit134Dst, k string) float64 { return d.(*rotator.Rotator).QueryString(k) },
	})
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		mk := lim(e)
		pairs = append(pairs, audit134Pair{
			name: "limiter-" + e.String(),
			src: func(t *testing.T, n int) (io.WriterTo, int64) {
				l, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				l.AllowN(clock.Now(), "a", 100*n)
				return l, l.SnapshotSize()
			},
			dst: func(t *testing.T) audit134Dst {
				l, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			probe: func(d audit134Dst, k string) float64 {
				return float64(d.(*limit.Limiter).PeekN(clock.Now(), k, 1).Remaining)
			},
		})
	}
	pairs = append(pairs, audit134Pair{
		name: "rate",
		src: func(t *testing.T, n int) (io.WriterTo, int64) {
			r, err := meter.NewRate(time.Minute, meter.WithClock(clock), meter.WithSize(3, 64))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 60*n; i++ {
				r.Observe("a")
			}
			return r, r.SnapshotSize()
		},
		dst: func(t *testing.T) audit134Dst {
			r, err := meter.NewRate(time.Minute, meter.WithClock(clock), meter.WithSize(3, 64))
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		probe: func(d audit134Dst, k string) float64 { return d.(*meter.Rate).PerSecond(k) },
	})
	pairs = append(pairs, audit134Pair{
		name: "novelty",
		src: func(t *testing.T, n int) (io.WriterTo, int64) {
			nv, err := meter.NewNovelty(time.Minute, meter.WithClock(clock), meter.WithSize(3, 64))
			if err != nil {
				t.Fatal(err)
			}
			if n == 2 {
				nv.Seen("a")
			}
			return nv, nv.SnapshotSize()
		},
		dst: func(t *testing.T) audit134Dst {
			nv, err := meter.NewNovelty(time.Minute, meter.WithClock(clock), meter.WithSize(3, 64))
			if err != nil {
				t.Fatal(err)
			}
			return nv
		},
		probe: func(d audit134Dst, k string) float64 {
			if d.(*meter.Novelty).Contains(k) {
				return 1
			}
			return 0
		},
	})
	return pairs
}

// TestAudit134ConcatenatedStreamsReadExactly: two different snapshots back
// to back; ReadFrom reads exactly the first, then exactly the second.
func TestAudit134ConcatenatedStreamsReadExactly(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			var buf bytes.Buffer
			var sizes [3]int64
			var want [3]float64
			for n := 1; n <= 2; n++ {
				src, size := p.src(t, n)
				w, err := src.WriteTo(&buf)
				if err != nil {
					t.Fatal(err)
				}
				if w != size {
					t.Fatalf("WriteTo wrote %d bytes, SnapshotSize says %d", w, size)
				}
				sizes[n] = w
				// What a single restore reads.
				one := p.dst(t)
				data := buf.Bytes()[int64(buf.Len())-w:]
				if _, err := one.ReadFrom(bytes.NewReader(data)); err != nil {
					t.Fatal(err)
				}
				want[n] = p.probe(one, "a")
			}
			if want[1] == want[2] {
				t.Fatalf("the two snapshots read alike (%v): the test cannot tell them apart", want[1])
			}
			all := append([]byte(nil), buf.Bytes()...)
			for _, mode := range []string{"plain", "onebyte", "dataerr"} {
				var rd io.Reader = bytes.NewReader(all)
				switch mode {
				case "onebyte":
					rd = iotest.OneByteReader(rd)
				case "dataerr":
					rd = iotest.DataErrReader(rd)
				}
				for n := 1; n <= 2; n++ {
					d := p.dst(t)
					got, err := d.ReadFrom(rd)
					if err != nil {
						t.Fatalf("%s: snapshot %d of the stream: %v", mode, n, err)
					}
					if got != sizes[n] {
						t.Fatalf("%s: snapshot %d: ReadFrom read %d bytes, want exactly %d", mode, n, got, sizes[n])
					}
					if v := p.probe(d, "a"); v != want[n] {
						t.Fatalf("%s: snapshot %d restored %v, want %v", mode, n, v, want[n])
					}
				}
				// Nothing left.
				if k, _ := rd.Read(make([]byte, 1)); k != 0 {
					t.Fatalf("%s: bytes left after both snapshots", mode)
				}
			}
		})
	}
}

// TestAudit134DuplicatedFileRefused: a file holding the snapshot twice
// (a botched copy, an append instead of a replace) is refused by Load as
// corrupt, the destination left as built.
func TestAudit134DuplicatedFileRefused(t *testing.T) {
	clock := audit134Clock()
	dir := t.TempDir()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			src, _ := p.src(t, 2)
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			one := append([]byte(nil), buf.Bytes()...)
			for _, tc := range []struct {
				name string
				data []byte
			}{
				{"twice", append(append([]byte(nil), one...), one...)},
				{"plus-header", append(append([]byte(nil), one...), one[:64]...)},
				{"half", one[:len(one)/2]},
			} {
				path := filepath.Join(dir, p.name+"-"+tc.name+".snap")
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
				d := p.dst(t)
				before := p.probe(d, "a")
				err := snapshot.Load(path, d.(snapshot.Destination))
				if !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Fatalf("%s: Load = %v, want ErrCorruptSnapshot", tc.name, err)
				}
				var le *snapshot.LoadError
				if !errors.As(err, &le) {
					t.Fatalf("%s: Load error %T is not a *LoadError", tc.name, err)
				}
				if v := p.probe(d, "a"); v != before {
					t.Fatalf("%s: refused Load changed the destination: %v, was %v", tc.name, v, before)
				}
			}
		})
	}
}

// TestAudit134CrossKindReadFrom: every kind of snapshot fed straight to
// every other kind's ReadFrom (and UnmarshalBinary where it has one), not
// through Load's size check: a typed error (ErrCorruptSnapshot or
// ErrSnapshotMismatch), never a silent restore, and the destination
// (holding a restored snapshot of its own) unchanged or, for a sketch or
// limiter refused past its header, empty.
func TestAudit134CrossKindReadFrom(t *testing.T) {
	clock := audit134Clock()
	pairs := audit134Pairs(clock)
	snaps := make([][]byte, len(pairs))
	for i, p := range pairs {
		src, _ := p.src(t, 2)
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snaps[i] = buf.Bytes()
	}
	for i, from := range pairs {
		for j, into := range pairs {
			if i == j {
				continue
			}
			empty := into.probe(into.dst(t), "a")
			for _, api := range []string{"ReadFrom", "UnmarshalBinary"} {
				d := into.dst(t)
				if _, err := d.ReadFrom(bytes.NewReader(snaps[j])); err != nil {
					t.Fatal(err)
				}
				before := into.probe(d, "a")
				var err error
				if api == "ReadFrom" {
					_, err = d.ReadFrom(bytes.NewReader(snaps[i]))
				} else if u, ok := d.(interface{ UnmarshalBinary([]byte) error }); ok {
					err = u.UnmarshalBinary(snaps[i])
				} else {
					continue
				}
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Errorf("%s snapshot into %s.%s: %v, want a typed refusal", from.name, into.name, api, err)
				}
				got := into.probe(d, "a")
				mayEmpty := into.name == "sketch" || into.name[:4] == "limi"
				if got != before && !(mayEmpty && got == empty) {
					t.Errorf("%s snapshot into %s.%s: destination changed: %v, was %v", from.name, into.name, api, got, before)
				}
			}
		}
	}
}

// audit134StrictReader serves data and then fails the test on any further
// Read asking for bytes: what a connection left open after a snapshot
// would do is block there.
type audit134StrictReader struct {
	data  []byte
	extra int
}

func (r *audit134StrictReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		if len(p) > 0 {
			r.extra++
		}
		return 0, nil // neither data nor EOF, as a blocking stream
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestAudit134ReadFromNoReadPastEnd: ReadFrom "reads exactly the
// snapshot's bytes": on a stream that stays open after the snapshot (a
// socket, a pipe), it returns once it has them, without asking for more.
// Here a Read past the end returns (0, nil) and is counted; io.Pipe's
// variant below blocks for real, checked with a deadline.
func TestAudit134ReadFromNoReadPastEnd(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			src, size := p.src(t, 2)
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			r := &audit134StrictReader{data: buf.Bytes()}
			d := p.dst(t)
			done := make(chan error, 1)
			go func() {
				n, err := d.ReadFrom(r)
				if err == nil && n != size {
					err = fmt.Errorf("read %d bytes, want %d", n, size)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if r.extra > 0 {
					t.Fatalf("ReadFrom asked for bytes past the snapshot's end %d times", r.extra)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadFrom did not return with the whole snapshot read (it spins asking for more)")
			}

			// A pipe whose writer stays open.
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write(buf.Bytes()) }()
			d2 := p.dst(t)
			done2 := make(chan error, 1)
			go func() { _, err := d2.ReadFrom(pr); done2 <- err }()
			select {
			case err := <-done2:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				pw.CloseWithError(errors.New("test gave up"))
				t.Fatalf("ReadFrom blocked on an open pipe after the whole snapshot")
			}
		})
	}
}

// TestAudit134RestoreReplacesNotAdds: a restore replaces the receiver's
// state (docs/snapshots.md: the receiver is "built first", a restore
// "restores"; Load: "restores dst"): a receiver that already holds a
// restored snapshot, restored again from the same snapshot (a duplicated
// load) or from another, reads exactly what a fresh receiver restored
// from the last one reads; nothing is added twice, nothing of the earlier
// state survives.
func TestAudit134RestoreReplacesNotAdds(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			var snaps [3][]byte
			for n := 1; n <= 2; n++ {
				src, _ := p.src(t, n)
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				snaps[n] = buf.Bytes()
			}
			fresh := func(n int) float64 {
				d := p.dst(t)
				if _, err := d.ReadFrom(bytes.NewReader(snaps[n])); err != nil {
					t.Fatal(err)
				}
				return p.probe(d, "a")
			}
			for _, seq := range [][]int{{2, 2}, {1, 2}, {2, 1}, {1, 1, 1}, {2, 2, 2}} {
				d := p.dst(t)
				for _, n := range seq {
					if _, err := d.ReadFrom(bytes.NewReader(snaps[n])); err != nil {
						t.Fatal(err)
					}
				}
				last := seq[len(seq)-1]
				if got, want := p.probe(d, "a"), fresh(last); got != want {
					t.Fatalf("restores %v: reads %v, a fresh restore of the last reads %v", seq, got, want)
				}
				if u, ok := d.(interface{ UnmarshalBinary([]byte) error }); ok {
					for _, n := range seq {
						if err := u.UnmarshalBinary(snaps[n]); err != nil {
							t.Fatal(err)
						}
					}
					if got, want := p.probe(d, "a"), fresh(last); got != want {
						t.Fatalf("UnmarshalBinary %v: reads %v, a fresh restore of the last reads %v", seq, got, want)
					}
				}
			}
		})
	}
}

// TestAudit134ReadFromCountsOnRefusal: ReadFrom "returns the bytes read"
// (io.ReaderFrom; limit.Limiter.ReadFrom: "and returns the bytes read")
// on a refusal too: for truncations at every header boundary and inside
// the cells, and for a snapshot of another configuration, the count
// equals what it consumed from the reader, never more than the input.
func TestAudit134ReadFromCountsOnRefusal(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			src, _ := p.src(t, 2)
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			full := buf.Bytes()
			cuts := []int{0, 1, 4, 5, 8, 27, 28, 31, 32, 55, 56, 59, 60, 63, 64, 65, 88, 100, 120, 121, 200, len(full) / 2, len(full) - 5, len(full) - 4, len(full) - 1}
			for _, c := range cuts {
				if c >= len(full) {
					continue
				}
				r := bytes.NewReader(full[:c])
				d := p.dst(t)
				n, err := d.ReadFrom(r)
				if err == nil {
					t.Fatalf("cut at %d: accepted", c)
				}
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Errorf("cut at %d: untyped %v", c, err)
				}
				if consumed := int64(c - r.Len()); n != consumed {
					t.Errorf("cut at %d: ReadFrom returned %d, consumed %d", c, n, consumed)
				}
			}
		})
	}
}

var errAudit134Disk = errors.New("audit134: disk went away")

// TestAudit134ReadFromReaderErrorMidway: the reader fails (not EOF) after
// k bytes, for k across every header and into the cells. ReadFrom
// returns an error (it must not report success on a partial read), and
// leaves the receiver, which held a restored snapshot of its own, never
// half restored: unchanged, or (a sketch or limiter past its header)
// empty (docs/snapshots.md "What a failed restore leaves"; "A rotator
// builds new generations and publishes them only on success"). Recorded,
// not asserted: whether the reader's own error is kept in the chain.
func TestAudit134ReadFromReaderErrorMidway(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			var snaps [3][]byte
			for n := 1; n <= 2; n++ {
				src, _ := p.src(t, n)
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				snaps[n] = buf.Bytes()
			}
			empty := p.probe(p.dst(t), "a")
			lost := 0
			full := snaps[1]
			for k := 0; k < len(full); k += 1 + k/3 {
				d := p.dst(t)
				if _, err := d.ReadFrom(bytes.NewReader(snaps[2])); err != nil {
					t.Fatal(err)
				}
				before := p.probe(d, "a")
				r := io.MultiReader(bytes.NewReader(full[:k]), iotest.ErrReader(errAudit134Disk))
				_, err := d.ReadFrom(r)
				if err == nil {
					t.Fatalf("k=%d: a read failing midway was reported a success", k)
				}
				if !errors.Is(err, errAudit134Disk) {
					lost++
				}
				mayEmpty := p.name == "sketch" || p.name[:4] == "limi"
				if got := p.probe(d, "a"); got != before && !(mayEmpty && got == empty) {
					t.Fatalf("k=%d: half restored: reads %v, was %v (empty %v)", k, got, before, empty)
				}
			}
			if lost > 0 {
				t.Logf("%d cut points return an error that does not wrap the reader's", lost)
			}
		})
	}
}
