package limit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// TestConfigErrors: every error of New and NewMulti is a
// *sketch.ConfigError naming the field, prefixed "limit: ", matched by
// errors.Is(err, sketch.ErrInvalidConfig); a nil Option is one of them
// (before: a nil dereference), and every size is bounded: too many
// generations, or cells above MaxBytes, are refused at once instead of
// allocated (WithGenerations(1<<31) allocated for minutes).
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
		opts  []limit.Option
		field string
	}{
		{1, 0, nil, "Burst"},
		{1, 1 << 25, nil, "Burst"},
		{limit.Limit(math.NaN()), 1, nil, "Limit"},
		{0, 1, nil, "Limit"},
		{1e30, 1, nil, "Limit"},
		{1, 1, []limit.Option{nil}, "Option"},
		{1, 1, []limit.Option{limit.WithSeed(1), nil}, "Option"},
		{1, 1, []limit.Option{limit.WithRejectCost(-1)}, "RejectCost"},
		{1, 1, []limit.Option{limit.WithName("")}, "Name"},
		{1, 2, []limit.Option{limit.WithMaxDebt(1)}, "MaxDebt"},
		{1e-40, 1, nil, "MaxDebt"},
		{1, 1, []limit.Option{limit.WithGenerations(1)}, "Generations"},
		{1, 1, []limit.Option{limit.WithGenerations(limit.MaxGenerations + 1)}, "Generations"},
		{1, 1, []limit.Option{limit.WithGenerations(1 << 31)}, "Generations"},
		{1, 1, []limit.Option{limit.WithSize(8, 1<<26)}, "Size"},                                             // 2 x 4 GiB
		{1, 1, []limit.Option{limit.WithSize(4, 1000), limit.WithMaxBytes(2 * core.CellBytes(4, 1000))}, ""}, // fits exactly
		{1, 1, []limit.Option{limit.WithSize(4, 1000), limit.WithMaxBytes(2*core.CellBytes(4, 1000) - 1)}, "Size"},
		{1, 1, []limit.Option{limit.WithMaxBytes(-1)}, "MaxBytes"},
		{1, 1, []limit.Option{limit.WithSize(9, 0)}, "Levels"},
		{1, 1, []limit.Option{limit.WithPeriod(time.Millisecond)}, "Period"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Engine(9))}, "Engine"},
		{limit.Inf, 1, []limit.Option{limit.WithEngine(limit.Engine(9))}, "Engine"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithSize(4, 10)}, "Engine"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithGenerations(3)}, "Engine"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithPeriod(time.Hour)}, "Engine"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithConservativeUpdate(true)}, "Engine"},
		{1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithConservativeUpdate(false)}, ""},
		{limit.Every(time.Minute), 1, []limit.Option{limit.WithEngine(limit.Buckets)}, "Engine"}, // MaxDebt drains in 2 min
		{1, 31, []limit.Option{limit.WithEngine(limit.Buckets)}, "Engine"},                       // 62 s
		{1, 30, []limit.Option{limit.WithEngine(limit.Buckets)}, ""},                             // 60 s
		{limit.Limit(7.3), 20, []limit.Option{limit.WithEngine(limit.Buckets)}, "Engine"},        // a token of 10000/73 ms
		{limit.Limit(math.Pi), 1, []limit.Option{limit.WithEngine(limit.Buckets)}, "Engine"},     // not a short fraction
		{1, 1, []limit.Option{limit.WithCapacity(0, 0.01)}, "Capacity"},
		{1, 1, []limit.Option{limit.WithCapacity(1000, 0)}, "Capacity"},
		{1, 1, []limit.Option{limit.WithCapacity(1000, 1)}, "Capacity"},
		{1, 1, []limit.Option{limit.WithCapacity(1000, math.NaN())}, "Capacity"},
		{1, 1, []limit.Option{limit.WithCapacity(1000, 0.01), limit.WithEngine(limit.CountMin), limit.WithCapacity(0, 0.01)}, "Capacity"},
		{1, 1, []limit.Option{limit.WithCapacity(1000, 0.01), limit.WithSize(4, 10)}, "Capacity"},
		{10, 20, []limit.Option{limit.WithCapacity(10_000_000, 0.01), limit.WithMaxBytes(1 << 20)}, "Size"},
		{10, 20, []limit.Option{limit.WithCapacity(10_000_000, 0.01), limit.WithMaxBytes(1 << 20), limit.WithEngine(limit.CountMin)}, "Size"},
		{10, 20, []limit.Option{limit.WithMaxBytes(1 << 20)}, "Size"}, // the default 6.1 MiB
	} {
		start := time.Now()
		_, err := limit.New(c.lim, c.burst, c.opts...)
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("New(%v, %d) took %v", c.lim, c.burst, el)
		}
		if c.field == "" {
			if err != nil {
				t.Errorf("New(%v, %d): %v", c.lim, c.burst, err)
			}
			continue
		}
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != c.field ||
			!strings.HasPrefix(err.Error(), "limit: ") {
			t.Errorf("New(%v, %d): %v, want a *sketch.ConfigError for %s", c.lim, c.burst, err, c.field)
		}
	}
	for _, ws := range [][]*limit.Limiter{nil, {nil}, {limit.MustNew(1, 1), {}}} {
		var ce *sketch.ConfigError
		if _, err := limit.NewMulti(ws...); !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("NewMulti(%v): %v", ws, err)
		}
	}
}

// TestEngineChoice: Auto picks Buckets where it is exact and CountMin
// elsewhere, or where a count-min option is given; Exact says the truth
// either way; WithCapacity sizes the engine chosen (Suggest's numbers),
// and the default Buckets engine holds no more memory than the default
// count-min.
func TestEngineChoice(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
		opts  []limit.Option
		want  limit.Engine
	}{
		{10, 20, nil, limit.Buckets},
		{1000, 1000, nil, limit.Buckets},
		{limit.Every(100 * time.Millisecond), 5, nil, limit.Buckets},
		{1, 30, nil, limit.Buckets},
		{1, 31, nil, limit.CountMin},
		// MaxDebt 60,000 tokens of one tick, 8,000 ticks to the ms: a
		// millisecond does not fit beside them in the 2^16-tick window.
		{8e6, 30000, nil, limit.CountMin},
		{8e6, 20000, nil, limit.Buckets},
		{limit.Every(time.Minute), 10, nil, limit.CountMin},
		{limit.Limit(math.Pi), 10, nil, limit.CountMin},
		{10, 20, []limit.Option{limit.WithSize(4, 1000)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithSize(0, 0)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithGenerations(3)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithPeriod(time.Hour)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithConservativeUpdate(true)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithConservativeUpdate(false)}, limit.Buckets},
		{10, 20, []limit.Option{limit.WithEngine(limit.CountMin)}, limit.CountMin},
		{10, 20, []limit.Option{limit.WithEngine(limit.Buckets)}, limit.Buckets},
		{limit.Inf, 20, nil, limit.Auto},
	} {
		l, err := limit.New(c.lim, c.burst, c.opts...)
		if err != nil {
			t.Fatalf("New(%v, %d): %v", c.lim, c.burst, err)
		}
		if l.Engine() != c.want {
			t.Errorf("New(%v, %d, %d options): engine %v, want %v", c.lim, c.burst, len(c.opts), l.Engine(), c.want)
		}
		if l.Engine() == limit.Buckets && (!l.Exact() || l.Period() != 0) {
			t.Errorf("New(%v, %d): Buckets with Exact %v, Period %v", c.lim, c.burst, l.Exact(), l.Period())
		}
	}
	b, cm := limit.MustNew(10, 20), limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	if b.Sizes().Total > cm.Sizes().Total {
		t.Errorf("default Buckets %+v above the default count-min %+v", b.Sizes(), cm.Sizes())
	}
	s, err := limit.Suggest(100_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithCapacity(100_000, 0.01), limit.WithEngine(e))
		want := s.Buckets.Bytes
		if e == limit.CountMin {
			want = s.CountMin.Bytes
		}
		if got := l.Sizes().Cells; got < want*9/10 || got > want*11/10 {
			t.Errorf("%v with WithCapacity(100k, 1%%): %d bytes of cells, Suggest says %d", e, got, want)
		}
	}
}

// TestZeroValues: the zero Limiter and the zero Multi panic with a clear
// message in every decision method instead of admitting (the zero
// Limiter admitted every request, silently).
func TestZeroValues(t *testing.T) {
	var l limit.Limiter
	var m limit.Multi
	ctx := context.Background()
	for name, f := range map[string]func(){
		"Allow":    func() { l.Allow("k") },
		"AllowN":   func() { l.AllowN(time.Now(), "k", 1) },
		"Decide":   func() { l.DecideN(time.Now(), "k", 1) },
		"Peek":     func() { l.PeekN(time.Now(), "k", 1) },
		"ReserveN": func() { l.ReserveN(time.Now(), "k", 1) },
		"WaitN":    func() { _ = l.WaitN(ctx, "k", 1) },
		"Now":      func() { l.Now() },
		"Multi":    func() { m.AllowN(time.Now(), "k", 1) },
	} {
		func() {
			defer func() {
				s, _ := recover().(string)
				if !strings.HasPrefix(s, "limit: zero ") {
					t.Errorf("%s on a zero value: panic %q", name, s)
				}
			}()
			f()
			t.Errorf("%s on a zero value returned", name)
		}()
	}
	// The accessors answer zero values; the zero Reservation is not OK.
	var r limit.Reservation
	if l.Burst() != 0 || l.Limit() != 0 || r.OK() || r.Delay() != limit.InfDuration {
		t.Fatal("zero accessors")
	}
	r.Cancel()
}

// TestSuggestBucketsBeyondCountMin: a capacity only the Buckets engine
// reaches (a billion keys at 1%: about 5 GB of lines, while the
// count-min would need more than 2^30 cells per level) is answered, with
// CountMin zero; it used to be an error for both.
func TestSuggestBucketsBeyondCountMin(t *testing.T) {
	s, err := limit.Suggest(1_000_000_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if s.Buckets.Lines == 0 || s.Buckets.Deny > 0.005 || s.CountMin != (limit.CountMinSize{}) {
		t.Fatalf("Suggest(1e9, 0.01) = %+v; want a Buckets size and CountMin zero", s)
	}
	if _, err := limit.Suggest(1<<40, 0.01); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("Suggest(2^40, 0.01): %v, want a config error (no engine reaches it)", err)
	}
}
