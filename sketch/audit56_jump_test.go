package sketch_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// docs/snapshots.md: a cell written during the encode is read back to T
// by a law with an inverse (so WriteTo states it at any lead), and keeps
// its stamp under a custom law, for which "a clock that jumps further
// than [2^24 ms] during an encode, with a cell written after the jump,
// makes WriteTo fail with an error that says so"; either way a restore
// on a clock at the write's time reads it at its value (not decayed
// before it was written). Until stop 47 the provided laws were refused
// too.
func TestAudit56WriteToJumpDuringEncode(t *testing.T) {
	if h := float64(1<<24) / 3.6e6; math.Abs(h-4.66) > 0.005 {
		t.Fatalf("2^24 ms = %.3f h, doc 4.66", h)
	}
	for _, law := range []struct {
		name  string
		d     decay.Decay
		stamp bool // keeps its stamp: refused past 2^24 ms
	}{{"Exponential", decay.Exponential(1e-5), false}, {"custom", customExp56{1e-5}, true}} {
		cfg := func(c sketch.Clock) sketch.Config {
			return sketch.Config{Hi: 1000, Levels: 2, CellsPerLevel: 64, Seed: 4, Decay: law.d, Clock: c}
		}
		for _, c := range []struct {
			jump time.Duration
			past bool
		}{{24 * time.Hour, true}, {time.Duration(1<<24)*time.Millisecond + time.Second, true}, {4 * time.Hour, false}, {time.Duration(1<<24) * time.Millisecond, false}} {
			clock := sketchtest.NewFakeClock()
			s, err := sketch.New(cfg(clock))
			if err != nil {
				t.Fatal(err)
			}
			w := &testhook.Writer{Hook: func() {
				clock.Advance(c.jump)
				s.UpdateString("k", 50)
			}}
			_, err = s.WriteTo(w)
			if law.stamp && c.past {
				if err == nil {
					t.Errorf("%s, jump %v: WriteTo succeeded; snapshots.md: it fails past 2^24 ms", law.name, c.jump)
				} else if !strings.HasPrefix(err.Error(), "sketch:") || !errors.Is(err, sketch.ErrTakeAgain) {
					t.Errorf("%s, jump %v: error %q without the sketch: prefix or ErrTakeAgain", law.name, c.jump, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s, jump %v: WriteTo: %v", law.name, c.jump, err)
				continue
			}
			// restore on a clock at the write's time: 50, not decayed early
			c2 := sketchtest.NewFakeClock()
			c2.Advance(c.jump)
			r, _ := sketch.New(cfg(c2))
			if err := r.UnmarshalBinary(w.Buf.Bytes()); err != nil {
				t.Fatalf("%s, jump %v: restore: %v", law.name, c.jump, err)
			}
			if got := r.QueryString("k"); got < 50*(1-1e-5) || got > 50*(1+1e-4) {
				t.Errorf("%s, jump %v: restored %v at the write's time, want 50 (never below the truth)", law.name, c.jump, got)
			}
		}
	}
}

// docs/snapshots.md / migrating.md (audits 49-51): "the provided laws read
// it back over the whole lead": a replica whose clock is 1 day ahead (and
// one created 9.3 h ahead, after the merge instant on its own clock)
// merges its write of 50 as 50 at the write's time, not 25.1 / 35.7.
func TestAudit56MergeWholeLead(t *testing.T) {
	for _, lead := range []time.Duration{24 * time.Hour, 9*time.Hour + 18*time.Minute} {
		ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		cb.Advance(lead)
		mk := func(c sketch.Clock) *sketch.Sketch {
			s, err := sketch.New(sketch.Config{Hi: 1000, Levels: 2, CellsPerLevel: 64, Seed: 4, Decay: decay.Exponential(1e-5), Clock: c})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := mk(ca), mk(cb)
		b.UpdateString("k", 50)
		if err := a.Merge(b); err != nil {
			t.Fatalf("lead %v: Merge: %v", lead, err)
		}
		ca.Advance(lead)
		if got := a.QueryString("k"); got < 50*(1-1e-5) {
			t.Errorf("lead %v: merged %v at the write's time, want 50", lead, got)
		}
	}
}

// docs/snapshots.md: "A restore caps a negative age at 2^24 ms (4.66
// hours), so that a forged record cannot stop a cell's decay for longer";
// "a write of 50 made one day after T under Exponential(1e-5) restored as
// 24.9" is what that cap gives a record stated one day ahead.
func TestAudit56RestoreCapsNegativeAge(t *testing.T) {
	mk := func(c sketch.Clock) *sketch.Sketch {
		s, err := sketch.New(sketch.Config{Hi: 1000, Levels: 2, CellsPerLevel: 64, Seed: 4, Decay: decay.Exponential(1e-5), Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c := sketchtest.NewFakeClock()
	s := mk(c)
	s.UpdateString("k", 50)
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	const day = 86_400_000
	neg := int32(-day)
	forged := 0
	for off := 88; off+8 <= len(b)-4; off += 8 {
		if binary.LittleEndian.Uint32(b[off:]) != 0 {
			binary.LittleEndian.PutUint32(b[off+4:], uint32(neg))
			forged++
		}
	}
	if forged != 2 {
		t.Fatalf("forged %d cells, want 2 (L)", forged)
	}
	fixCRC56(b)
	r := mk(c)
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	c.Advance(day * time.Millisecond)
	got := r.QueryString("k")
	want := 50 * math.Exp(-1e-5*float64(day-(1<<24))/1000)
	if math.Abs(got-want) > 0.01 {
		t.Errorf("a record 1 day ahead read %v a day later, want %v (capped at 2^24 ms)", got, want)
	}
	if math.Round(want*10)/10 != 24.9 {
		t.Errorf("the cap's value %v, snapshots.md says 24.9", want)
	}
}

type customExp56 struct{ lambda float64 }

func (c customExp56) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return score * math.Exp(-c.lambda*float64(dt)/1000)
}

// docs/snapshots.md: "A credit (a negative score) or a custom law's score
// has no such bound and keeps the old rule, with the lead capped at 2^24
// ms (4.66 hours): a write made during the merge after a clock jump
// longer than that decays by the excess." Logs what a custom law's later
// cell reads after a merge, for a lead within and beyond the cap.
func TestAudit56MergeCustomLawLead(t *testing.T) {
	for _, lead := range []time.Duration{time.Hour, 24 * time.Hour} {
		ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		mk := func(c sketch.Clock) *sketch.Sketch {
			s, err := sketch.New(sketch.Config{Hi: 1000, Levels: 2, CellsPerLevel: 64, Seed: 4, Decay: customExp56{1e-5}, Clock: c})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := mk(ca), mk(cb)
		cb.Advance(lead)
		b.UpdateString("k", 50)
		if err := a.Merge(b); err != nil {
			t.Fatalf("lead %v: Merge: %v", lead, err)
		}
		ca.Advance(lead)
		got := a.QueryString("k")
		excess := max(0, lead.Milliseconds()-1<<24)
		want := 50 * math.Exp(-1e-5*float64(excess)/1000)
		t.Logf("custom law, lead %v: merged %v at the write's time (doc: decays by the excess over 2^24 ms: %v)", lead, got, want)
		if got < want*(1-1e-4) {
			t.Errorf("custom law, lead %v: merged %v, below the documented %v", lead, got, want)
		}
	}
}
