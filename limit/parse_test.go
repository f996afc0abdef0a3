package limit_test

import (
	"encoding"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

var (
	_ encoding.TextMarshaler   = limit.Limit(0)
	_ encoding.TextUnmarshaler = (*limit.Limit)(nil)
	_ json.Unmarshaler         = (*limit.Limit)(nil)
)

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want limit.Limit
	}{
		{"100/s", 100},
		{"1000/h", limit.Limit(1000.0 / 3600)},
		{"5/m", limit.Limit(5.0 / 60)},
		{"10/250ms", 40},
		{"1/250ms", limit.Every(250 * time.Millisecond)},
		{"1/3s", limit.Every(3 * time.Second)},
		{"1/7ms", limit.Every(7 * time.Millisecond)},
		{"2/1m30s", limit.Limit(2.0 / 90)},
		{"0.5/s", 0.5},
		{".5/s", 0.5},
		{"1e3/s", 1000},
		{"10000/d", limit.Limit(10000.0 / 86400)},
		{"1/2d", limit.Limit(1.0 / 172800)},
		{"3/1.5h", limit.Limit(3.0 / 5400)},
		{"  100 / s \n", 100},
		{"100/S", 100},
		{"100/MS", 100000},
		{"7/us", 7e6},
		{"7/µs", 7e6},
		{"100", 100},
		{"1e-3", 0.001},
		{"1000-H", limit.Limit(1000.0 / 3600)},
		{"5-m", limit.Limit(5.0 / 60)},
		{"20-S", 20},
		{"864-D", 0.01},
		{"inf", limit.Inf},
		{" Inf ", limit.Inf},
		{"1e22/s", 1e22},
	} {
		got, err := limit.ParseLimit(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseLimitErrors(t *testing.T) {
	for _, in := range []string{
		"", " ", "/", "/s", "100/", "-1/s", "+1/s", "0/s", "0", "nan/s", "inf/s", "0x10/s",
		"1_000/s", "100/x", "100/0s", "100/-1s", "100/1 s", "100/s/s", "1e23/s", "1e400/s",
		"1e-400/s", "1000-X", "1000-", "-H", "100 per second", "1/100000000000000000d",
		"1/1e400d", "10/0d", "ten/s", "1..2/s", "e5/s",
	} {
		l, err := limit.ParseLimit(in)
		var ce *sketch.ConfigError
		if err == nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("ParseLimit(%q) = %v, %v; want a *sketch.ConfigError", in, l, err)
			continue
		}
		if ce.Field != "Limit" || ce.Value != in || !strings.HasPrefix(err.Error(), "limit: ParseLimit: ") ||
			!strings.HasSuffix(err.Error(), "; got "+jsonQuote(in)) {
			t.Errorf("ParseLimit(%q): error %q (Field %q, Value %v)", in, err, ce.Field, ce.Value)
		}
	}
}

// jsonQuote is %q for the test's plain inputs.
func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestLimitMarshalText(t *testing.T) {
	for _, c := range []struct {
		in   limit.Limit
		want string
	}{
		{100, "100/s"},
		{limit.Limit(1000.0 / 3600), "1000/h"},
		{limit.Limit(5.0 / 60), "5/m"},
		{limit.Every(3 * time.Second), "20/m"},
		{limit.Every(250 * time.Millisecond), "4/s"},
		{0.5, "0.5/s"},
		{2.5, "2.5/s"},
		{limit.Limit(1.0 / 3600), "1/h"},
		{limit.Limit(10000.0 / 86400), "10000/d"},
		{limit.Every(7 * time.Millisecond), "142.85714285714286/s"},
		{1e-6, "1e-06/s"},
		{1e22, "1e+22/s"},
		{limit.Inf, "inf"},
		{limit.Limit(math.Inf(1)), "inf"},
	} {
		b, err := c.in.MarshalText()
		if err != nil || string(b) != c.want {
			t.Errorf("MarshalText(%v) = %q, %v; want %q", c.in, b, err, c.want)
		}
	}
	// What New refuses is written (a zero-valued configuration marshals)
	// and refused back.
	for bad, want := range map[limit.Limit]string{0: "0/s", -1: "-1/s", 1.5e22: "1.5e+22/s", limit.Limit(math.Inf(-1)): "-Inf/s"} {
		b, err := bad.MarshalText()
		if err != nil || string(b) != want {
			t.Errorf("MarshalText(%v) = %q, %v; want %q", bad, b, err, want)
		}
		if _, err := limit.ParseLimit(string(b)); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("ParseLimit(%q): %v; want a *sketch.ConfigError", b, err)
		}
	}
	if b, _ := limit.Limit(math.NaN()).MarshalText(); string(b) != "NaN/s" {
		t.Errorf("MarshalText(NaN) = %q", b)
	}
}

// Every Limit New accepts reads back to itself, bit for bit: random
// float64s over the whole range, and the rates of Every(d).
func TestLimitRoundTrip(t *testing.T) {
	check := func(l limit.Limit) {
		b, err := l.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", l, err)
		}
		got, err := limit.ParseLimit(string(b))
		if err != nil || got != l {
			t.Fatalf("ParseLimit(%q) = %v, %v; want %v (bits %x)", b, got, err, l, math.Float64bits(float64(l)))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	n := testsize.Pick(100_000, 10_000) // full size in the purego step
	for range n {
		l := limit.Limit(math.Float64frombits(r.Uint64() >> 1)) // >= 0, NaN and Inf included
		switch {
		case l > 0 && l <= 1e22 && newTakes(l):
			check(l)
		case l > 0 && l <= 1e22: // below the slowest rate New takes (audit 130)
			if b, _ := l.MarshalText(); !errorsIsConfig(limit.ParseLimit(string(b))) {
				t.Fatalf("ParseLimit(%q) accepted a rate New refuses at every burst", b)
			}
		}
		check(limit.Every(time.Duration(r.Int64N(int64(time.Hour))) + 1))
		check(limit.Limit(r.IntN(1_000_000)+1) / limit.Limit([]float64{1, 60, 3600, 86400}[r.IntN(4)]))
	}
	check(limit.Inf)
}

func TestLimitUnmarshal(t *testing.T) {
	var cfg struct {
		A, B, C limit.Limit
		D       limit.Limit `json:",omitempty"`
	}
	if err := json.Unmarshal([]byte(`{"A": "1000/h", "B": 2.5, "C": "inf", "D": null}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.A != limit.Limit(1000.0/3600) || cfg.B != 2.5 || cfg.C != limit.Inf || cfg.D != 0 {
		t.Fatalf("decoded %+v", cfg)
	}
	out, err := json.Marshal(cfg)
	if err != nil || string(out) != `{"A":"1000/h","B":"2.5/s","C":"inf"}` {
		t.Fatalf("json.Marshal: %s, %v", out, err)
	}
	for _, bad := range []string{`{"A": "fast"}`, `{"A": -1}`, `{"A": true}`, `{"A": "1\u0000/s"}`} {
		if err := json.Unmarshal([]byte(bad), &cfg); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("json.Unmarshal(%s): %v; want a *sketch.ConfigError", bad, err)
		}
	}
	if out, err := json.Marshal(struct{ R limit.Limit }{}); err != nil || string(out) != `{"R":"0/s"}` {
		t.Fatalf("a zero-valued configuration: %s, %v", out, err)
	}
	l := limit.Limit(7)
	if err := l.UnmarshalText([]byte("nope")); err == nil || l != 7 {
		t.Fatalf("UnmarshalText of a bad string: %v, l = %v (want unchanged)", err, l)
	}

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var rate limit.Limit
	fs.TextVar(&rate, "rate", limit.Limit(10), "per-client rate")
	if err := fs.Parse([]string{"-rate", "5/m"}); err != nil || rate != limit.Limit(5.0/60) {
		t.Fatalf("flag: %v, %v", rate, err)
	}
	if got := fs.Lookup("rate").DefValue; got != "10/s" {
		t.Fatalf("flag default %q", got)
	}
}

// FuzzParseLimit: any string either parses to a rate New accepts that
// marshals back to itself, or is a *sketch.ConfigError naming it; never a
// panic, never a NaN, zero, negative or infinite finite rate.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"100/s", "1000/h", "5/m", "10/250ms", "1000-H", "inf", "1e-3", "2/1m30s", "1/2d", "100/0s", "1e400/s", " 7 / µs "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := limit.ParseLimit(s)
		if err != nil {
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Limit" || ce.Value != s || !strings.HasPrefix(err.Error(), "limit: ") {
				t.Fatalf("ParseLimit(%q): error %#v", s, err)
			}
			return
		}
		if l != limit.Inf && !(l > 0 && l <= 1e22) {
			t.Fatalf("ParseLimit(%q) = %v", s, l)
		}
		b, err := l.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", l, err)
		}
		if back, err := limit.ParseLimit(string(b)); err != nil || back != l {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, l, b, back, err)
		}
	})
}

// errorsIsConfig reports whether ParseLimit's error is a *sketch.ConfigError.
func errorsIsConfig(_ limit.Limit, err error) bool { return errors.Is(err, sketch.ErrInvalidConfig) }
