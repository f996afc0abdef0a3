package limit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
)

// TestWaitNilContextPanicsNamingIt: WaitN (a Limiter's and a Tier's)
// panics on a nil context with a message that names it, having debited
// nothing, whatever n (above the burst too).
func TestWaitNilContextPanicsNamingIt(t *testing.T) {
	l, err := New(Every(time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l.Tier("t", Every(time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Limiter.Wait", func() { _ = l.Wait(nilCtx, "k") }},
		{"Limiter.WaitN", func() { _ = l.WaitN(nilCtx, "k", 2) }},
		{"Limiter.WaitN above the burst", func() { _ = l.WaitN(nilCtx, "k", 3) }},
		{"Tier.Wait", func() { _ = tier.Wait(nilCtx, "k") }},
	} {
		if msg := testpanic.Message(c.f); !strings.Contains(msg, "nil Context") {
			t.Errorf("%s(nil ctx): panic %q; want one naming the nil Context", c.name, msg)
		}
	}
	if got := l.Tokens("k"); got != 2 {
		t.Errorf("Tokens after the panics = %v; want 2 (nothing debited)", got)
	}
}
