package limit_test

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// a138Takes reports whether New takes rate v at some burst (burst and
// MaxDebt 1: the least debt it holds).
func a138Takes(v float64) bool {
	_, err := limit.New(limit.Limit(v), 1, limit.WithMaxDebt(1), limit.WithSize(1, 1))
	return err == nil
}

// FuzzAudit138LimitUnmarshalJSON: Limit.UnmarshalJSON on any bytes never
// panics and, as its doc says ("accepts a JSON string (ParseLimit's
// forms) or, as before Limit was a TextUnmarshaler, a JSON number of
// events per second. null leaves l unchanged"):
//   - null (any space around) leaves l unchanged, no error;
//   - a valid JSON string decodes to what ParseLimit makes of its text,
//     or the same *sketch.ConfigError field;
//   - a valid JSON number is that many events per second, bit for bit
//     as encoding/json reads it into a float64, when New takes that rate,
//     and an error otherwise (as a float64 decoded, then New, refused it);
//   - on any error l is unchanged, the error a *sketch.ConfigError
//     naming Limit (errors.Is sketch.ErrInvalidConfig);
//   - json.Unmarshal into a struct field agrees with the direct call on
//     valid JSON; what it accepts marshals (json.Marshal) and reads back
//     to the same Limit.
func FuzzAudit138LimitUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`"100/s"`, `100`, ` null `, `"inf"`, `1e-3`, `1E22`, `1e23`, `-1`, `0`, `-0`, `0.5e1`,
		`"\u0031/s"`, `"1000-H"`, `true`, `{}`, `[1]`, `"`, `"a" "b"`, `1e400`, `3e-36`, `2.9e-36`, `"null"`, `nul`,
		`100/s`, `inf`, `"  7 / µs "`, `1.0000000000000000000000000001`, `0.1`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 200 {
			return
		}
		const start = limit.Limit(7)
		l := start
		err := l.UnmarshalJSON(b)
		if err != nil {
			var ce *sketch.ConfigError
			if l != start {
				t.Fatalf("UnmarshalJSON(%q): %v, yet l changed to %v", b, err, float64(l))
			}
			if !errors.As(err, &ce) || ce.Field != "Limit" || !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Fatalf("UnmarshalJSON(%q): error %#v", b, err)
			}
		}
		s := strings.TrimSpace(string(b))
		if s == "null" {
			if err != nil || l != start {
				t.Fatalf("UnmarshalJSON(%q) = %v, %v; want unchanged", b, float64(l), err)
			}
			return
		}
		if !json.Valid(b) {
			return // only a direct call sees it; json.Unmarshal refuses it first
		}
		var st struct{ L limit.Limit }
		st.L = start
		serr := json.Unmarshal([]byte(`{"L":`+string(b)+`}`), &st)
		if (serr == nil) != (err == nil) || st.L != l && !(math.IsNaN(float64(st.L)) && math.IsNaN(float64(l))) {
			t.Fatalf("%q: direct %v, %v; in a struct %v, %v", b, float64(l), err, float64(st.L), serr)
		}
		switch {
		case strings.HasPrefix(s, `"`):
			var u string
			if json.Unmarshal(b, &u) != nil {
				t.Fatalf("%q: valid JSON starting with a quote is no string?", b)
			}
			want, werr := limit.ParseLimit(u)
			if (werr == nil) != (err == nil) || err == nil && want != l {
				t.Fatalf("UnmarshalJSON(%q) = %v, %v; ParseLimit(%q) = %v, %v", b, float64(l), err, u, float64(want), werr)
			}
		case s[0] == '-' || s[0] >= '0' && s[0] <= '9':
			v, perr := strconv.ParseFloat(s, 64)
			takes := perr == nil && v > 0 && v <= 1e22 && a138Takes(v)
			if takes != (err == nil) {
				t.Fatalf("UnmarshalJSON(%q) = %v, %v; the number is %v (%v), New takes it: %v", b, float64(l), err, v, perr, takes)
			}
			if err == nil && math.Float64bits(float64(l)) != math.Float64bits(v) {
				t.Fatalf("UnmarshalJSON(%q) = %v, want %v per second", b, float64(l), v)
			}
		default:
			if err == nil {
				t.Fatalf("UnmarshalJSON(%q) = %v: neither a string nor a number, yet accepted", b, float64(l))
			}
		}
		if err != nil {
			return
		}
		out, merr := json.Marshal(l)
		if merr != nil {
			t.Fatalf("json.Marshal(%v): %v", float64(l), merr)
		}
		back := start
		if err := json.Unmarshal(out, &back); err != nil || back != l {
			t.Fatalf("%q -> %v -> %s -> %v, %v", b, float64(l), out, float64(back), err)
		}
	})
}
