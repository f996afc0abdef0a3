package grudge_test

// Audit 111; fixed at stop 61 (migrating.md's "Limits and errors" names
// them), the text below says what was wrong.
//
// Audit 111 (the grudge façade against the reference): inputs refused
// beyond grudge's own validation.
//
// REFERENCE.md states grudge's validation: it "rejects NaN parameters,
// Lo >= Hi, Lo <= 0 <= Hi violated, Hi = +Inf without effective decay".
// So grudge takes a law with a rate of 0 (Exponential(0), Linear(0): the
// "ineffective" decay that rule is about; a service whose decay is a
// setting, 0 meaning off) and an infinite Lo under any law. New refuses
// all three. docs/migrating.md ("Limits and errors") lists what is
// refused beyond grudge: "Lo/Hi beyond the float32 range, a cell block
// above 4 GiB, and Lo = Hi = 0"; none of these. Either New takes them as
// grudge does, or the list names them.

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// audit111LimitsSection returns docs/migrating.md's "Limits and errors"
// section, lower-cased, its whitespace collapsed.
func audit111LimitsSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("docs/migrating.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "### Limits and errors")
	if i < 0 {
		t.Fatal(`docs/migrating.md has no "### Limits and errors" section`)
	}
	sec := doc[i+len("### Limits and errors"):]
	if j := strings.Index(sec, "\n#"); j >= 0 {
		sec = sec[:j]
	}
	return strings.ToLower(strings.Join(strings.Fields(sec), " "))
}

// TestAudit111FixedRefusedBeyondGrudgeListed fails today: Exponential(0),
// Linear(0) and Lo = -Inf under None are accepted by grudge (by
// REFERENCE.md's list of what it rejects) and refused by New, and
// migrating.md's list of what is refused beyond grudge does not name them.
func TestAudit111FixedRefusedBeyondGrudgeListed(t *testing.T) {
	sec := audit111LimitsSection(t)
	zeroRate := []string{"exponential(0)", "linear(0)", "rate of 0", "rate 0", "zero rate", "rate is 0",
		"lambda 0", "lambda = 0", "rate = 0", "non-positive", "a rate or lambda"}
	cases := []struct {
		name    string
		cfg     grudge.Config
		spelled []string                                           // ways the section may name the refusal
		behaves func(*grudge.Sketch, *grudgetest.FakeClock) string // grudge's behaviour, if New accepts
	}{
		{"Exponential(0)", grudge.Config{Hi: 100, Decay: grudge.Exponential(0)}, zeroRate, audit111NoDecay},
		{"Linear(0)", grudge.Config{Hi: 100, Decay: grudge.Linear(0)}, zeroRate, audit111NoDecay},
		{"Lo=-Inf/None", grudge.Config{Lo: math.Inf(-1), Hi: 100, Decay: grudge.None()},
			[]string{"lo = -inf", "lo: -inf", "lo=-inf", "lo -inf", "infinite lo", "lo is -inf", "-inf"},
			func(s *grudge.Sketch, _ *grudgetest.FakeClock) string {
				k := []byte("k")
				s.Update(k, -5)
				if got := s.Query(k); got != -5 {
					return "Update(k, -5) then Query: " + strconv.FormatFloat(got, 'g', -1, 64) + ", want -5"
				}
				return ""
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := grudgetest.NewFakeClock()
			c.cfg.Clock = clk
			s, err := grudge.New(c.cfg)
			if err == nil {
				if msg := c.behaves(s, clk); msg != "" {
					t.Errorf("accepted, but not as grudge behaves: %s", msg)
				}
				return
			}
			for _, w := range c.spelled {
				if strings.Contains(sec, w) {
					return // refused, and listed
				}
			}
			t.Errorf("New refuses %s (%v), which grudge accepts (REFERENCE.md: grudge rejects only NaN parameters, "+
				"Lo >= Hi, Lo <= 0 <= Hi violated, Hi = +Inf without effective decay); migrating.md's \"Limits and errors\" "+
				"does not list it among the inputs refused beyond grudge", c.name, err)
		})
	}
}

// audit111NoDecay checks a law with a rate of 0 leaves a score as it is,
// as grudge's Exponential(0) and Linear(0) do.
func audit111NoDecay(s *grudge.Sketch, clk *grudgetest.FakeClock) string {
	k := []byte("k")
	s.Update(k, 7)
	clk.Advance(time.Hour)
	if got := s.Query(k); got != 7 {
		return "7 read " + strconv.FormatFloat(got, 'g', -1, 64) + " an hour later, want 7"
	}
	return ""
}
