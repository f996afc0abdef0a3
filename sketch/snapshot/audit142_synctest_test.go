package snapshot_test

// Audit 142: the Saver inside a testing/synctest bubble. Its goroutine
// and time.Ticker are made in the bubble, so they run on fake time: it
// saves once per fake interval, and Close ends the goroutine there
// (synctest.Test panics on a goroutine left blocked at its end).

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func TestAudit142SaverInBubble(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		s, err := sketch.New(sketch.Config{CellsPerLevel: 64, Hi: 1e9, Seed: 142})
		if err != nil {
			t.Fatal(err)
		}
		sv, err := snapshot.NewSaver(filepath.Join(dir, "s.snap"), time.Minute, s)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if n := sv.Saves(); n != 3 {
			t.Fatalf("saves after 3 fake intervals: %d", n)
		}
		if err := sv.Close(); err != nil {
			t.Fatal(err)
		}
		if n := sv.Saves(); n != 4 {
			t.Fatalf("saves after Close: %d, want 4", n)
		}
	})
}
