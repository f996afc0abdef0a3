package capacity

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Rate and Burst are the limiter measured: limit.New(10, 20), the
// numbers of issue 26 (MaxDebt 40, its default).
const (
	Rate  = 10
	Burst = 20
)

// Subject is one limiter under test.
type Subject struct {
	Name string
	// allowN debits n if admitted (writes); peek reports whether n would
	// be admitted, without writing.
	allowN func(t time.Time, key []byte, n int) bool
	peek   func(t time.Time, key []byte, n int) bool
	// Bytes is the memory the limiter holds.
	Bytes int
	// saturation is the limiter's own reading of its fresh-key denial
	// rate (NaN when it has none); predict is its model's (keys at their
	// limit so far).
	saturation func(t time.Time) float64
	predict    func(keys int) (deny, got float64)
}

// A Maker builds a fresh Subject on clock clk.
type Maker struct {
	Name string
	New  func(clk *sketchtest.FakeClock, seed uint64) (*Subject, error)
}

// CountMin is limit.New(Rate, Burst) on the count-min engine with
// WithSize(levels, cells) (0, 0: the default: 4 x 100,000 cells in each
// of two generations, 6.14 MiB by Sizes, 6.16 MiB of heap in
// docs/readings.md), and conservative update if cu. Its saturation
// reading is limit's Stats.
func CountMin(name string, levels, cells uint32, cu bool) Maker {
	return Maker{Name: name, New: func(clk *sketchtest.FakeClock, seed uint64) (*Subject, error) {
		l, err := limit.New(Rate, Burst, limit.WithClock(clk), limit.WithSeed(seed), limit.WithSize(levels, cells),
			limit.WithEngine(limit.CountMin), limit.WithConservativeUpdate(cu))
		if err != nil {
			return nil, err
		}
		lv, cs := levels, cells
		if lv == 0 {
			lv = 4
		}
		if cs == 0 {
			cs = 100_000
		}
		return limitSubject(name, l, func(keys int) (float64, float64) { return bucket.PredictCountMinDenial(keys, lv, cs) }), nil
	}}
}

// Limit is limit.New(Rate, Burst) with opts: by default the Buckets
// engine in its default memory, through limit's public API (its
// saturation reading is Stats; its model bucket.PredictDenial for its
// lines).
func Limit(name string, opts ...limit.Option) Maker {
	return Maker{Name: name, New: func(clk *sketchtest.FakeClock, seed uint64) (*Subject, error) {
		l, err := limit.New(Rate, Burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, opts...)...)
		if err != nil {
			return nil, err
		}
		if l.Engine() != limit.Buckets {
			return nil, fmt.Errorf("capacity: %s runs on %v", name, l.Engine())
		}
		lines := l.Sizes().Cells/bucket.LineBytes - 1
		return limitSubject(name, l, func(keys int) (float64, float64) { return bucket.PredictDenial(keys, lines) }), nil
	}}
}

func limitSubject(name string, l *limit.Limiter, predict func(int) (float64, float64)) *Subject {
	return &Subject{
		Name: name,
		allowN: func(t time.Time, key []byte, n int) bool {
			return l.AllowN(t, view(key), n)
		},
		peek: func(t time.Time, key []byte, n int) bool {
			return l.PeekN(t, view(key), n).Allowed
		},
		Bytes:      l.Sizes().Total,
		saturation: func(time.Time) float64 { return l.Stats().Saturation },
		predict:    predict,
	}
}

// Bucket is the bucketed engine with the limiter's law (Linear(Rate,
// 2 x Burst)) in at most bytes of memory (Engine.Bytes: its lines, their
// alignment slack and its own struct), deciding as limit does: admitted
// iff debt + n <= Burst.
func Bucket(name string, bytes int) Maker {
	return Maker{Name: name, New: func(clk *sketchtest.FakeClock, seed uint64) (*Subject, error) {
		cfg := bucket.Config{Lines: bucket.LinesFor(bytes), Law: bucket.Linear(Rate, 2*Burst), Clock: clk, Seed: seed, SeedSet: true}
		e, err := bucket.New(cfg)
		if err != nil {
			return nil, err
		}
		lines := cfg.Lines
		return &Subject{
			Name: name,
			allowN: func(t time.Time, key []byte, n int) bool {
				return e.TryUpdateAt(t, view(key), float64(n), Burst)
			},
			peek: func(t time.Time, key []byte, n int) bool {
				return e.QueryAt(t, view(key))+float64(n) <= Burst
			},
			Bytes:      e.Bytes(),
			saturation: func(t time.Time) float64 { return e.SaturationAt(t, 1, Burst) },
			predict:    func(keys int) (float64, float64) { return bucket.PredictDenial(keys, lines) },
		}, nil
	}}
}

// view returns b's bytes as a string without copying (the engines only
// hash it).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Row is one measurement: a limiter after Keys keys took their burst.
type Row struct {
	Subject string
	Bytes   int
	Keys    int
	// Got is the share of the Keys that were admitted their whole burst
	// (AllowN(t, key, Burst)).
	Got float64
	// PeekDenied is the share of Peek fresh keys that would be denied
	// one token (read only: the state the Keys left); AskDenied the share
	// of the first Fresh of them denied when they ask for it in turn
	// (each admitted one writes its own debt, as in issue 26's protocol).
	PeekDenied, AskDenied float64
	Peek, Fresh           int
	// Saturation is the limiter's own reading before the fresh keys
	// (NaN if it has none); PredictDenied and PredictGot its model's.
	Saturation, PredictDenied, PredictGot float64
	// Elapsed is the time the whole row took.
	Elapsed time.Duration
}

// Mix is a workload of mixed debts: key i of the held keys asks for
// N(i) tokens (at most Burst) instead of its whole burst.
type Mix struct {
	Name string
	N    func(i int) int
}

// The mixes of docs/capacity.md, "Conservative update".
var (
	// Full: every key takes its whole burst (Measure's protocol).
	Full = Mix{"all at full debt (20)", func(int) int { return Burst }}
	// Uniform: key i takes 1 + (i x 7919 mod 20) tokens: debts spread
	// evenly over 1..20.
	Uniform = Mix{"debts 1..20, uniform", func(i int) int { return 1 + i*7919%Burst }}
	// Heavy10: one key in ten takes its whole burst, the others 2 tokens.
	Heavy10 = Mix{"10% at 20, 90% at 2", func(i int) int {
		if i%10 == 0 {
			return Burst
		}
		return 2
	}}
)

// MixRow is one measurement of MeasureMix.
type MixRow struct {
	Subject, Mix string
	Bytes, Keys  int
	// Got is the share of the keys admitted their n; PeekDenied the
	// share of peek fresh keys that would be denied one token; Saturation
	// the limiter's own reading.
	Got, PeekDenied, Saturation float64
	Peek                        int
}

// MeasureMix is Measure's protocol (no asking fresh keys) with the held
// keys asking for mix.N(i) tokens each.
func MeasureMix(m Maker, mix Mix, keys, peek int, seed uint64) (MixRow, error) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	s, err := m.New(clk, seed)
	if err != nil {
		return MixRow{}, err
	}
	t := clk.Now()
	buf := make([]byte, 0, 32)
	key := func(prefix string, i int) []byte {
		return strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
	}
	got := 0
	for i := range keys {
		if s.allowN(t, key("client-", i), mix.N(i)) {
			got++
		}
	}
	r := MixRow{Subject: s.Name, Mix: mix.Name, Bytes: s.Bytes, Keys: keys, Peek: peek, Got: float64(got) / float64(keys), Saturation: s.saturation(t)}
	denied := 0
	for i := range peek {
		if !s.peek(t, key("fresh-", i), 1) {
			denied++
		}
	}
	r.PeekDenied = float64(denied) / float64(peek)
	return r, nil
}

// Measure runs one row: a fresh subject, keys keys taking their burst at
// one instant, then peek fresh keys peeking and the first fresh of them
// asking, at the same instant (no time passes: no debt drains).
func Measure(m Maker, keys, peek, fresh int, seed uint64) (Row, error) {
	start := time.Now()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	s, err := m.New(clk, seed)
	if err != nil {
		return Row{}, err
	}
	t := clk.Now()
	buf := make([]byte, 0, 32)
	key := func(prefix string, i int) []byte {
		return strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
	}
	got := 0
	for i := range keys {
		if s.allowN(t, key("client-", i), Burst) {
			got++
		}
	}
	r := Row{Subject: s.Name, Bytes: s.Bytes, Keys: keys, Peek: peek, Fresh: fresh, Got: float64(got) / float64(keys)}
	r.Saturation = s.saturation(t)
	r.PredictDenied, r.PredictGot = s.predict(keys)
	peeked, asked := 0, 0
	for i := range peek {
		if !s.peek(t, key("fresh-", i), 1) {
			peeked++
		}
	}
	for i := range fresh {
		if !s.allowN(t, key("fresh-", i), 1) {
			asked++
		}
	}
	r.PeekDenied, r.AskDenied = float64(peeked)/float64(peek), float64(asked)/float64(fresh)
	r.Elapsed = time.Since(start)
	return r, nil
}

// MiB formats bytes in MiB.
func MiB(b int) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
