package limit

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lfgrudge/grudge/internal/units"
)

// ParseLimit parses a rate written as events per period, for flags,
// environment variables and configuration files:
//
//	"100/s"  "1000/h"  "5/m"  "10/250ms"  "0.5/s"  "10000/d"  "2/1m30s"
//	"100"    (a bare number is per second, as a Limit is)
//	"inf"    (Inf)
//	"1000-H" (ulule/limiter's form: S, M, H or D after a dash)
//
// The count is a decimal number (an exponent is allowed, a sign is not);
// the period is a unit (ns, us, µs, ms, s, m, h, d, any case) or a
// time.ParseDuration duration, optionally followed by the unit d (24 h)
// alone ("2d"). Space around the string and around "/" is ignored. The
// result is count / period: "1/250ms" is exactly Every(250*time.Millisecond).
// A string it cannot parse, or a rate New refuses whatever the burst
// (zero, above 1e22, or below about 2.9e-36 per second, where one token's
// drain overflows a float32 cell), is
// a *sketch.ConfigError (errors.Is(err, sketch.ErrInvalidConfig)) naming
// the field "Limit", prefixed "limit: ". [Limit.MarshalText] writes a form
// ParseLimit reads back to the same Limit.
func ParseLimit(s string) (Limit, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "inf") {
		return Inf, nil
	}
	count, period, ok := strings.Cut(t, "/")
	if !ok {
		// ulule/limiter's "1000-H": a dash, then one letter (a dash
		// before a digit is an exponent's: "1e-3" is per second).
		if i := strings.LastIndexByte(t, '-'); i > 0 && len(t)-i == 2 && unicode.IsLetter(rune(t[i+1])) {
			count, period, ok = t[:i], t[i+1:], true
			if !strings.ContainsRune("smhdSMHD", rune(period[0])) {
				return 0, badLimit(s, "the period after %q must be S, M, H or D", "-")
			}
		}
	}
	n, err := parseCount(strings.TrimSpace(count))
	if err != nil {
		return 0, badLimit(s, "%v", err)
	}
	sec := 1.0
	if ok {
		d, err := parsePeriod(strings.TrimSpace(period))
		if err != nil {
			return 0, badLimit(s, "%v", err)
		}
		sec = d.Seconds()
	}
	r := n / sec
	switch {
	case r == 0 || math.IsInf(r, 0): // an underflow, or a count above MaxFloat64
		return 0, badLimit(s, "the rate must be > 0 and finite")
	case r > maxRate:
		return 0, badLimit(s, "the rate must be <= %g per second (or inf)", maxRate)
	case tooSlow(r):
		return 0, badLimit(s, "the rate must be >= %.3g per second (one token's drain in a float32 cell)", 1000/math.MaxFloat32)
	}
	return Limit(r), nil
}

// tooSlow reports whether New refuses rate r whatever the burst: at
// burst and MaxDebt 1, the least debt New holds, in the finest units it
// picks (Units at MaxDebt 1), one token's drain is above a float32 cell
// (New's "MaxDebt / limit" bound; audit 130).
func tooSlow(r float64) bool {
	unit, _, _, _ := units.Units(r, 1)
	return heldUnits(1, unit) > math.MaxFloat32
}

// badLimit returns ParseLimit's *sketch.ConfigError for s.
func badLimit(s, format string, args ...any) error {
	return bad("Limit", s, "ParseLimit: "+format+` (want "count/period", e.g. "100/s", "1000/h" or "10/250ms"); got %q`, append(args, s)...)
}

// parseCount parses a positive decimal count: digits, an optional
// fraction and exponent; no sign, no hexadecimal, no underscores, no
// "inf" or "nan" (strconv.ParseFloat alone accepts all of those).
func parseCount(s string) (float64, error) {
	if s == "" {
		return 0, errString("the count is missing")
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, errString("the count must be a decimal number")
		}
	}
	if s[0] < '0' && s[0] != '.' || s[0] > '9' {
		return 0, errString("the count must be a decimal number without a sign")
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRange(err) {
		return 0, errString("the count must be a decimal number")
	}
	if n <= 0 {
		return 0, errString("the count must be > 0")
	}
	return n, nil // +Inf on overflow: the caller refuses it
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// parsePeriod parses the period after "/": a bare unit ("s", "ms", "d"),
// a Go duration ("250ms", "1m30s"), or a number of days ("2d"); any case.
func parsePeriod(s string) (time.Duration, error) {
	if s == "" {
		return 0, errString("the period is missing")
	}
	for _, c := range s {
		if unicode.IsSpace(c) {
			return 0, errString("the period must not contain spaces")
		}
	}
	p := strings.ToLower(s)
	if p[0] == '.' || p[0] >= '0' && p[0] <= '9' {
		// A number first: a duration, or days.
	} else {
		p = "1" + p
	}
	if strings.HasSuffix(p, "d") {
		days, err := parseCount(p[:len(p)-1])
		ns := days * float64(24*time.Hour)
		if err != nil || !(ns < float64(math.MaxInt64)) { // 2^63: the first float64 out of range
			return 0, errString("the period must be a positive duration")
		}
		d := time.Duration(ns)
		if d <= 0 {
			return 0, errString("the period must be a positive duration")
		}
		return d, nil
	}
	d, err := time.ParseDuration(p)
	if err != nil || d <= 0 {
		return 0, errString("the period must be a positive duration (a unit ns, us, ms, s, m, h or d, or one like 250ms)")
	}
	return d, nil
}

type errString string

func (e errString) Error() string { return string(e) }

// periods are the units MarshalText tries, in order, after a whole or
// short per-second count: the first in which the rate is a whole count
// that reads back exactly is used.
var periods = [...]struct {
	unit string
	d    time.Duration
}{{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}, {"ms", time.Millisecond}}

// MarshalText writes l as ParseLimit reads it back, exactly: "inf" for
// Inf (and for +Inf, which reads back as Inf: New takes both as Inf); per second when l is a whole number or a decimal of at most 6
// significant digits ("100/s", "2.5/s", "1e-06/s"); otherwise "N/m",
// "N/h", "N/d" or "N/ms" with N a whole number, the first of those that
// reads back to l (Every(3*time.Second) is "20/m", 1000/h "1000/h");
// otherwise the shortest decimal per second ("142.85714285714286/s"). A
// Limit New would refuse is written the same way ("0/s", "-1/s",
// "NaN/s"), so that a zero-valued configuration still marshals;
// ParseLimit refuses it back, as New does. It never returns an error.
func (l Limit) MarshalText() ([]byte, error) {
	r := float64(l)
	switch {
	case l == Inf || math.IsInf(r, 1):
		return []byte("inf"), nil
	case math.IsNaN(r) || r <= 0 || r > maxRate:
		return []byte(strconv.FormatFloat(r, 'g', -1, 64) + "/s"), nil
	}
	if n := math.Round(r); n >= 1 && n < 1<<53 && n == r {
		return []byte(strconv.FormatFloat(n, 'f', -1, 64) + "/s"), nil
	}
	if short, _ := strconv.ParseFloat(strconv.FormatFloat(r, 'g', 6, 64), 64); short == r {
		return []byte(strconv.FormatFloat(r, 'g', -1, 64) + "/s"), nil
	}
	for _, p := range periods[1:] {
		sec := p.d.Seconds()
		if n := math.Round(r * sec); n >= 1 && n < 1<<53 && n/sec == r {
			return []byte(strconv.FormatFloat(n, 'f', -1, 64) + "/" + p.unit), nil
		}
	}
	return []byte(strconv.FormatFloat(r, 'g', -1, 64) + "/s"), nil
}

// UnmarshalText sets l to ParseLimit(text) (encoding.TextUnmarshaler: flag.TextVar,
// encoding/json strings, YAML and TOML decoders). On an error l is unchanged.
func (l *Limit) UnmarshalText(text []byte) error {
	v, err := ParseLimit(string(text))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// UnmarshalJSON accepts a JSON string (ParseLimit's forms) or, as before
// Limit was a TextUnmarshaler, a JSON number of events per second. null
// leaves l unchanged.
func (l *Limit) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		return nil
	case strings.HasPrefix(s, `"`):
		var u string
		if err := json.Unmarshal(b, &u); err != nil {
			return bad("Limit", s, "UnmarshalJSON: not a JSON string; got %s", s)
		}
		return l.UnmarshalText([]byte(u))
	}
	return l.UnmarshalText([]byte(s)) // a number: per second
}
