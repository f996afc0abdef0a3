package meter_test

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
)

type a43Clock struct {
	ms    atomic.Int64
	reads atomic.Int64
}

func (c *a43Clock) NowMillis() int64 { c.reads.Add(1); return c.ms.Load() }

// meter/doc.go's "Core operations (pseudo-code)" gives
//
//	Novelty.Seen(k): fresh := s.TryUpdate(k, 1-theta, 1); s.Update(k, 1); return !fresh
//
// the two-step algorithm docs/migrating.md (audit23 row) says was replaced
// because it told two racing callers "new": the code now decides and
// saturates in one TryUpdate(k, 1, 1+theta) and Updates only a key already
// seen (meter/novelty.go seenAt). A fresh Seen is one sketch operation.
// Fixed: the pseudo-code is the code's now.
func TestAudit43FixedNoveltyPseudoCodeStale(t *testing.T) {
	c := &a43Clock{}
	c.ms.Store(1_000_000)
	n, err := meter.NewNovelty(time.Second, meter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	n.Seen("warm")
	before := c.reads.Load()
	if n.Seen("fresh-key") {
		t.Fatal("fresh key reported seen")
	}
	ops := c.reads.Load() - before
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	const stale = "fresh := s.TryUpdate(k, 1-theta, 1); s.Update(k, 1); return !fresh"
	if strings.Contains(string(doc), stale) {
		t.Errorf("meter/doc.go pseudo-code %q describes two sketch operations per Seen (TryUpdate of 1-theta under limit 1, then an unconditional Update); "+
			"the code makes %d clock reading(s) (one operation) for a fresh key: TryUpdate(k, 1, 1+theta), Update only when seen (the audit23 fix, docs/migrating.md)", stale, ops)
	}
}
