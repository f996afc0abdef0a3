package snapshot_test

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

type audit64Flaky struct {
	fails, calls int
	wrap         bool
}

func (f *audit64Flaky) WriteTo(w io.Writer) (int64, error) {
	f.calls++
	if f.calls <= f.fails {
		if f.wrap {
			return 0, fmt.Errorf("rotator: promoted; %w", sketch.ErrTakeAgain)
		}
		return 0, errors.New("disk on fire")
	}
	n, err := w.Write([]byte("snapshot"))
	return int64(n), err
}

// migrating.md: "`snapshot.Saver` tries three more times at once"; Stop 46:
// the refusal is `sketch.ErrTakeAgain`.
func TestAudit64SaverTakeAgain(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		fails     int
		wrap      bool
		ok        bool
		wantCalls int
	}{{3, true, true, 4}, {4, true, false, 4}, {1, false, false, 1}} {
		src := &audit64Flaky{fails: c.fails, wrap: c.wrap}
		s, err := snapshot.NewSaver(filepath.Join(dir, fmt.Sprintf("s%d%v", c.fails, c.wrap)), time.Hour, src)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Save()
		calls := src.calls
		s.Close() // a final save: more calls
		if (err == nil) != c.ok || calls != c.wantCalls {
			t.Errorf("fails %d (ErrTakeAgain %v): Save %v after %d calls; want ok=%v after %d", c.fails, c.wrap, err, calls, c.ok, c.wantCalls)
		}
		if err != nil && c.wrap && !errors.Is(err, sketch.ErrTakeAgain) {
			t.Errorf("Save error %v does not match sketch.ErrTakeAgain", err)
		}
	}
	// README: "A limiter (and meter.Rate, meter.Novelty) ... is a
	// snapshot.Source and Destination".
	var _ snapshot.Source = (*limit.Limiter)(nil)
	var _ snapshot.Destination = (*limit.Limiter)(nil)
	var _ snapshot.Source = (*meter.Rate)(nil)
	var _ snapshot.Destination = (*meter.Rate)(nil)
	var _ snapshot.Source = (*meter.Novelty)(nil)
	var _ snapshot.Destination = (*meter.Novelty)(nil)
}
