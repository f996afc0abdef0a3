package sketch

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestQuickSentinel(t *testing.T) {
	s, err := New(Config{Hi: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s.TryUpdateString("k", 1, 1000) {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if n.Load() != 1000 || s.QueryString("k") != 1000 {
		t.Fatal(n.Load(), s.QueryString("k"))
	}
	s.UpdateString("x", 2.5)
	if q := s.QueryString("x"); q != 2.5 {
		t.Fatal(q)
	}
}
