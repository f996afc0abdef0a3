package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// a58Writer passes writes through to w and runs hook before the n-th one
// (1-based): the meter header is write 1, the rotator header write 2, the
// generations' chunks (64 KiB each) the later ones.
type a58Writer struct {
	w     io.Writer
	n     int
	calls int
	hook  func()
}

func (h *a58Writer) Write(p []byte) (int, error) {
	h.calls++
	if h.calls == h.n && h.hook != nil {
		h.hook()
	}
	return h.w.Write(p)
}

// a58Src is a snapshot.Source around a meter whose every WriteTo call
// runs start first, then hook(call) at write n of the encode.
type a58Src struct {
	src   io.WriterTo
	calls int
	n     int
	start func(call int)
	hook  func(call int)
}

func (s *a58Src) WriteTo(w io.Writer) (int64, error) {
	s.calls++
	call := s.calls
	if s.start != nil {
		s.start(call)
	}
	hw := &a58Writer{w: w, n: s.n}
	if s.hook != nil {
		hw.hook = func() { s.hook(call) }
	}
	return s.src.WriteTo(hw)
}

func a58Strays(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestAudit58SaverRefusedSnapshotKeepsPreviousFile: a Novelty (T = 100
// ms, PeriodWindows 1) whose every encode crosses a deadline under
// traffic (the Period shorter than an encode). Saver.Save asks 4 times
// (docs/snapshots.md: "a Saver tries three more times at once, then
// reports it"), then returns an error that wraps ErrTakeAgain and says
// "take the snapshot again"; the previous file is intact byte for byte,
// no temporary file is left, Saves is unchanged, LastError and OnError
// report it, and the file still restores to a Novelty that sees the
// keys marked before the good save.
func TestAudit58SaverRefusedSnapshotKeepsPreviousFile(t *testing.T) {
	const t0 = 1_700_000_000_000
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	nv, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(4, 1024), meter.WithPeriodWindows(1), meter.WithClock(c), meter.WithSeed(58))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		nv.Seen("k" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	src := &a58Src{src: nv, n: 3}
	dir := t.TempDir()
	path := filepath.Join(dir, "nov.snap")
	var onErr []error
	sv, err := snapshot.NewSaver(path, time.Hour, src, snapshot.OnError(func(e error) { onErr = append(onErr, e) }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		src.hook = nil
		sv.Close()
	}()
	if err := sv.Save(); err != nil {
		t.Fatalf("first save: %v", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if src.calls != 1 {
		t.Fatalf("a save that met nothing called WriteTo %d times, want 1", src.calls)
	}
	// Every later encode meets a deadline: the clock passes one Period
	// and an operation promotes while the cells are being written.
	src.calls = 0
	src.hook = func(int) {
		c.Advance(100 * time.Millisecond)
		nv.Seen("traffic")
	}
	err = sv.Save()
	if err == nil {
		t.Fatal("Save whose every encode crossed a promotion succeeded, want an error")
	}
	if !errors.Is(err, sketch.ErrTakeAgain) {
		t.Errorf("Save's error %q does not wrap ErrTakeAgain", err)
	}
	if !strings.Contains(err.Error(), "take the snapshot again") || !strings.Contains(err.Error(), path) {
		t.Errorf("Save's error %q does not say 'take the snapshot again' with the path", err)
	}
	if src.calls != 4 {
		t.Errorf("Save called WriteTo %d times, want 4 (one and three more: sketch/snapshot/snapshot.go)", src.calls)
	}
	if errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch) || errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Save's refusal %q matches a snapshot/config sentinel", err)
	}
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(now, good) {
		t.Errorf("the refused save changed the file (%d bytes, was %d)", len(now), len(good))
	}
	if s := a58Strays(t, dir); len(s) != 0 {
		t.Errorf("the refused save left temporary files %v", s)
	}
	if sv.Saves() != 1 {
		t.Errorf("Saves = %d after one good and one refused save, want 1", sv.Saves())
	}
	if le := sv.LastError(); le == nil || !errors.Is(le, sketch.ErrTakeAgain) {
		t.Errorf("LastError = %v, want the refusal", le)
	}
	if len(onErr) != 1 {
		t.Errorf("OnError called %d times, want 1 (one per failed Save, not per try)", len(onErr))
	}
	// The kept file restores the state of the good save.
	c2 := sketchtest.NewFakeClock()
	c2.Set(t0 + 10)
	back, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(4, 1024), meter.WithPeriodWindows(1), meter.WithClock(c2))
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(path, back); err != nil {
		t.Fatalf("Load of the kept file: %v", err)
	}
	for i := 0; i < 50; i++ {
		k := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if !back.Contains(k) {
			t.Errorf("restored from the kept file 10 ms after its save: %q unseen (marked at the save's instant, T = 100 ms)", k)
		}
	}
}

// TestAudit58SaverRetrySucceedsAfterOneRefusal: only the first encode
// meets a promotion; the second try at once succeeds, with Saves 1 and
// no error; the restored Rate reads at least what the live one does,
// and the restored Novelty sees every key marked before the save.
func TestAudit58SaverRetrySucceedsAfterOneRefusal(t *testing.T) {
	const t0 = 1_700_000_000_000
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	r, err := meter.NewRate(time.Second, meter.WithSize(4, 1024), meter.WithPeriodWindows(1), meter.WithClock(c), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 900; i++ {
		c.Advance(time.Millisecond)
		r.Observe("a")
	}
	src := &a58Src{src: r, n: 3, hook: func(call int) {
		if call == 1 {
			c.Advance(200 * time.Millisecond) // past the deadline at +1 s
			r.Observe("b")
		}
	}}
	path := filepath.Join(t.TempDir(), "rate.snap")
	sv, err := snapshot.NewSaver(path, time.Hour, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Save(); err != nil {
		t.Fatalf("Save with one refused try: %v", err)
	}
	sv.Close()
	if src.calls != 3 { // 2 in Save, 1 in Close
		t.Errorf("WriteTo called %d times (Save: refused + retry; Close: 1), want 3", src.calls)
	}
	live := r.PerSecond("a")
	c2 := sketchtest.NewFakeClock()
	c2.Set(c.NowMillis())
	back, err := meter.NewRate(time.Second, meter.WithSize(4, 1024), meter.WithPeriodWindows(1), meter.WithClock(c2))
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(path, back); err != nil {
		t.Fatal(err)
	}
	if got := back.PerSecond("a"); got < live {
		t.Errorf("restored Rate reads %v at the save's instant, the live one %v: below", got, live)
	}
	if got := back.PerSecond("b"); got < r.PerSecond("b") {
		t.Errorf("restored Rate reads %v for b (observed before the last save), live %v", got, r.PerSecond("b"))
	}
}

// TestAudit58WriteToRefusalTypedForBothMeters: Rate.WriteTo and
// Novelty.WriteTo refuse an encode a promotion crossed with an error
// wrapping sketch.ErrTakeAgain whose text says so; a Rotate-free encode of
// the same meter right after succeeds and restores.
func TestAudit58WriteToRefusalTypedForBothMeters(t *testing.T) {
	const t0 = 1_700_000_000_000
	type meterish interface {
		io.WriterTo
		io.ReaderFrom
	}
	mk := []struct {
		name string
		new  func(c *sketchtest.FakeClock) (meterish, func())
	}{
		{"Rate", func(c *sketchtest.FakeClock) (meterish, func()) {
			r, err := meter.NewRate(10*time.Millisecond, meter.WithSize(2, 64<<10), meter.WithPeriodWindows(1), meter.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			return r, func() { r.Observe("x") }
		}},
		{"Novelty", func(c *sketchtest.FakeClock) (meterish, func()) {
			n, err := meter.NewNovelty(10*time.Millisecond, meter.WithSize(2, 64<<10), meter.WithPeriodWindows(1), meter.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			return n, func() { n.Seen("x") }
		}},
	}
	for _, m := range mk {
		t.Run(m.name, func(t *testing.T) {
			c := sketchtest.NewFakeClock()
			c.Set(t0)
			x, op := m.new(c)
			op()
			var buf bytes.Buffer
			hw := &a58Writer{w: &buf, n: 4, hook: func() { c.Advance(10 * time.Millisecond); op() }}
			_, err := x.WriteTo(hw)
			if err == nil || !errors.Is(err, sketch.ErrTakeAgain) || !strings.Contains(err.Error(), "take the snapshot again") {
				t.Fatalf("WriteTo across a promotion: err %v, want one wrapping ErrTakeAgain", err)
			}
			buf.Reset()
			if _, err := x.WriteTo(&buf); err != nil {
				t.Fatalf("WriteTo again at once: %v", err)
			}
			c2 := sketchtest.NewFakeClock()
			c2.Set(c.NowMillis())
			y, _ := m.new(c2)
			if _, err := y.ReadFrom(&buf); err != nil {
				t.Fatalf("ReadFrom of the retaken snapshot: %v", err)
			}
		})
	}
}

// TestAudit58FixedSnapshotsDocSaverClockJump: docs/snapshots.md says of
// a clock that jumps more than 2^24 ms during an encode with a cell
// written after the jump: "WriteTo fail[s] with an error that says so
// (take the snapshot again; a `Saver` keeps the previous file and tries
// at its next interval)". Saver.Save instead tries again at once (its
// own doc: "a clock that jumped hours ... is asked up to three more
// times at once"), and the retry, whose instant is after the jump,
// succeeds: the previous file is replaced in the same Save. The two
// documents disagreed; snapshots.md now says what Save does, and this
// test holds it. A Novelty: its marks sit at its Hi and keep their
// stamps, so a write 5 h after the instant is refused (a Rate's cell is
// read back to the instant by its law since stop 47, and is not).
func TestAudit58FixedSnapshotsDocSaverClockJump(t *testing.T) {
	const t0 = 1_700_000_000_000
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	// within 1 h, Period 16 h: a 5 h jump promotes nothing.
	r, err := meter.NewNovelty(time.Hour, meter.WithSize(4, 64<<10), meter.WithClock(c), meter.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	r.Seen("old")
	src := &a58Src{src: r, n: 3}
	path := filepath.Join(t.TempDir(), "r.snap")
	sv, err := snapshot.NewSaver(path, time.Hour, src)
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	if err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	prev, _ := os.ReadFile(path)
	var firstErr error
	src.calls = 0
	src.hook = func(call int) {
		if call == 1 {
			c.Advance(5 * time.Hour)
			for i := 0; i < 200; i++ { // some cell lands after the first chunk
				r.Seen("new" + string(rune('A'+i%50)) + string(rune('A'+i/50)))
			}
		}
	}
	// Catch the first try's error through a WriteTo wrapper.
	inner := src.src
	src.src = writerToFunc(func(w io.Writer) (int64, error) {
		n, err := inner.WriteTo(w)
		if firstErr == nil {
			firstErr = err
		}
		return n, err
	})
	err = sv.Save()
	if firstErr == nil || !errors.Is(firstErr, sketch.ErrTakeAgain) {
		t.Fatalf("setup: the first encode across a 5 h jump was not refused (err %v)", firstErr)
	}
	now, _ := os.ReadFile(path)
	// docs/snapshots.md (after audit 58): "a `Saver` asks up to three more
	// times at once, and keeps the previous file if every try is
	// refused": the retry starts after the jump and succeeds.
	if err != nil || bytes.Equal(now, prev) || src.calls != 2 || sv.Saves() != 2 {
		t.Errorf("a Save across a clock jump: err %v, file replaced %v, %d WriteTo calls, Saves %d; want a retry at once that replaces the file (docs/snapshots.md)",
			err, !bytes.Equal(now, prev), src.calls, sv.Saves())
	}
}

type writerToFunc func(io.Writer) (int64, error)

func (f writerToFunc) WriteTo(w io.Writer) (int64, error) { return f(w) }

// a58Model drives one meter (a Novelty or a Rate) on a fake clock, with
// an exact oracle in "effective" time (the time the meter's decay has
// counted: the fake clock while live; after a restore, the snapshot's
// instant plus the forward downtime), through Saver saves whose encodes
// now and then meet a promotion (refused and retried), and restarts from
// the last good file with downtimes from -days to +days.
type a58Model struct {
	t        *testing.T
	rng      *rand.Rand
	novelty  bool
	c        *sketchtest.FakeClock
	eff      int64 // effective ms
	T        time.Duration
	periods  float64
	periodMs int64
	nv       *meter.Novelty
	rt       *meter.Rate
	marks    map[string]int64   // Novelty: key -> eff time of its last Seen
	events   map[string][]int64 // Rate: key -> eff times of its Observes (n = 1)
	// the oracle at the start of the WriteTo call of the last good save
	savedMarks  map[string]int64
	savedEvents map[string][]int64
	savedEff    int64
	savedWall   int64
	pendMarks   map[string]int64
	pendEvents  map[string][]int64
	pendEff     int64
	pendWall    int64
	haveSave    bool
	crossP      float64
	src         *a58Src
	sv          *snapshot.Saver
	path        string
	keys        []string
	refused     int
	saved       int
	restores    int
	log         []string
}

func (m *a58Model) logf(format string, args ...any) {
	if os.Getenv("A58LOG") != "" {
		m.log = append(m.log, fmt.Sprintf("eff=%d wall=%d ", m.eff, m.c.NowMillis())+fmt.Sprintf(format, args...))
	}
}

func (m *a58Model) build(c *sketchtest.FakeClock) {
	var err error
	if m.novelty {
		m.nv, err = meter.NewNovelty(m.T, meter.WithSize(3, 4096), meter.WithPeriodWindows(m.periods), meter.WithClock(c))
	} else {
		m.rt, err = meter.NewRate(m.T, meter.WithSize(3, 4096), meter.WithPeriodWindows(m.periods), meter.WithClock(c))
	}
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *a58Model) meter() io.WriterTo {
	if m.novelty {
		return m.nv
	}
	return m.rt
}

func (m *a58Model) advance(d int64) {
	m.logf("advance %d", d)
	m.c.Set(m.c.NowMillis() + d)
	m.eff += d
}

func (m *a58Model) op(k string) {
	if !m.novelty {
		m.rt.Observe(k)
		m.logf("observe %s", k)
		ev := m.events[k]
		for len(ev) > 0 && m.eff-ev[0] >= m.periodMs { // no longer in the oracle
			ev = ev[1:]
		}
		m.events[k] = append(ev, m.eff)
		return
	}
	got := m.nv.Seen(k)
	m.logf("seen %s -> %v", k, got)
	if last, ok := m.marks[k]; ok && m.eff-last < m.T.Milliseconds() && !got {
		m.t.Errorf("Novelty.Seen(%q) = new %d ms after its mark (T = %v, PeriodWindows %v): a false negative", k, m.eff-last, m.T, m.periods)
	}
	m.marks[k] = m.eff
}

func (m *a58Model) checkAll() {
	w := m.T.Seconds()
	for _, k := range m.keys {
		if m.novelty {
			if last, ok := m.marks[k]; ok && m.eff-last < m.T.Milliseconds() && !m.nv.Contains(k) {
				m.t.Errorf("Novelty.Contains(%q) false %d ms after its mark (T = %v, PeriodWindows %v, restores %d)", k, m.eff-last, m.T, m.periods, m.restores)
			}
			continue
		}
		var truth float64
		for _, e := range m.events[k] {
			if age := m.eff - e; age < m.periodMs {
				truth += math.Exp(-float64(age) / 1000 / w)
			}
		}
		truth /= w
		if got := m.rt.PerSecond(k); got < truth*(1-1e-9) {
			m.t.Errorf("Rate.PerSecond(%q) = %v below the oracle %v (events within one Period, decayed exactly; restores %d)", k, got, truth, m.restores)
		}
	}
}

func copyMarks(a map[string]int64) map[string]int64 {
	b := make(map[string]int64, len(a))
	for k, v := range a {
		b[k] = v
	}
	return b
}

func copyEvents(a map[string][]int64) map[string][]int64 {
	b := make(map[string][]int64, len(a))
	for k, v := range a {
		b[k] = append([]int64(nil), v...)
	}
	return b
}

func (m *a58Model) save() {
	prev, _ := os.ReadFile(m.path)
	m.src.calls = 0
	m.logf("save crossP=%v", m.crossP)
	err := m.sv.Save()
	m.logf("save -> %v (calls %d)", err, m.src.calls)
	if err != nil {
		m.refused++
		if !errors.Is(err, sketch.ErrTakeAgain) {
			m.t.Fatalf("save: %v", err)
		}
		if m.src.calls != 4 {
			m.t.Errorf("a refused Save called WriteTo %d times, want 4", m.src.calls)
		}
		if now, _ := os.ReadFile(m.path); !bytes.Equal(now, prev) {
			m.t.Errorf("a refused Save changed the file")
		}
		return
	}
	m.saved++
	m.haveSave = true
	m.savedMarks, m.savedEvents, m.savedEff, m.savedWall = m.pendMarks, m.pendEvents, m.pendEff, m.pendWall
}

// restart builds a fresh meter on a new clock at the current wall time
// plus down (may be negative) and loads the last good file into it.
func (m *a58Model) restart(down int64) {
	if !m.haveSave {
		return
	}
	m.restores++
	m.logf("restart down=%d (saved eff %d wall %d)", down, m.savedEff, m.savedWall)
	c := sketchtest.NewFakeClock()
	wall := m.c.NowMillis() + down
	c.Set(wall)
	m.c = c
	m.build(c)
	if err := snapshot.Load(m.path, m.meter().(snapshot.Destination)); err != nil {
		m.t.Fatalf("Load: %v", err)
	}
	m.marks, m.events = copyMarks(m.savedMarks), copyEvents(m.savedEvents)
	m.eff = m.savedEff + max(0, wall-m.savedWall)
	m.src.src = m.meter()
}

func a58RunModel(t *testing.T, novelty bool, periods float64, seed int64) {
	m := &a58Model{t: t, rng: rand.New(rand.NewSource(seed)), novelty: novelty, T: 100 * time.Millisecond, periods: periods,
		marks: map[string]int64{}, events: map[string][]int64{}}
	m.periodMs = int64(math.Ceil(float64(m.T.Milliseconds()) * periods))
	for i := 0; i < 40; i++ {
		m.keys = append(m.keys, "key"+string(rune('A'+i)))
	}
	m.c = sketchtest.NewFakeClock()
	m.c.Set(1_700_000_000_000)
	m.eff = 0
	m.build(m.c)
	m.path = filepath.Join(t.TempDir(), "m.snap")
	m.src = &a58Src{src: m.meter(), n: 3,
		start: func(int) {
			m.pendMarks, m.pendEvents, m.pendEff, m.pendWall = copyMarks(m.marks), copyEvents(m.events), m.eff, m.c.NowMillis()
			m.logf("writeTo start")
		},
		hook: func(int) {
			if m.rng.Float64() < m.crossP {
				m.advance(m.rng.Int63n(2*m.periodMs + 1))
				m.op(m.keys[m.rng.Intn(len(m.keys))])
			}
		}}
	var err error
	m.sv, err = snapshot.NewSaver(m.path, time.Hour, m.src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		m.src.start, m.src.hook = nil, nil
		m.sv.Close()
	}()
	const day = 24 * 3600 * 1000
	for step := 0; step < 450 && !t.Failed(); step++ {
		switch x := m.rng.Intn(100); {
		case x < 60:
			m.advance(m.rng.Int63n(30))
			m.op(m.keys[m.rng.Intn(len(m.keys))])
		case x < 70:
			m.advance(m.rng.Int63n(3 * m.periodMs))
		case x < 72:
			m.advance(m.rng.Int63n(3 * day))
		case x < 85:
			m.crossP = []float64{0, 0.3, 0.9, 1}[m.rng.Intn(4)]
			m.save()
		case x < 92:
			// Downtimes >= 0 from the current wall time, which is at or
			// after the end of every encode: a restoring clock behind a
			// generation's instant is TestAudit58Fixed*BehindClock*.
			downs := []int64{0, 1, m.rng.Int63n(m.T.Milliseconds()), m.rng.Int63n(3 * m.periodMs), m.rng.Int63n(3 * day)}
			m.restart(downs[m.rng.Intn(len(downs))])
		default:
			m.checkAll()
		}
		if step%50 == 0 {
			m.checkAll()
		}
	}
	t.Logf("saved %d, refused %d, restores %d", m.saved, m.refused, m.restores)
	if t.Failed() && len(m.log) > 0 {
		t.Logf("last events:\n%s", strings.Join(m.log[max(0, len(m.log)-300):], "\n"))
	}
}

// TestAudit58ModelNoveltySnapshotsRestores: Novelty's "no false negatives
// within T" across Saver saves whose encodes cross deadlines (refused,
// retried), restarts from the last good file after downtimes of -3 days
// to +3 days, idle gaps of days, at PeriodWindows 1, 1.5 and 16.
func TestAudit58ModelNoveltySnapshotsRestores(t *testing.T) {
	for _, p := range []float64{1, 1.5, 16} {
		for seed := int64(1); seed <= int64(testsize.Pick(2, 1)); seed++ {
			a58RunModel(t, true, p, seed*7+int64(p*10))
		}
	}
}

// TestAudit58ModelRateSnapshotsRestores: Rate never below the exact
// decayed count of its events within one Period (the rotation term the
// doc allows), through the same saves and restarts.
func TestAudit58ModelRateSnapshotsRestores(t *testing.T) {
	for _, p := range []float64{1, 1.5, 16} {
		for seed := int64(1); seed <= int64(testsize.Pick(2, 1)); seed++ {
			a58RunModel(t, false, p, seed*11+int64(p*10))
		}
	}
}
