package sketch_test

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Scores fade lazily: with Linear(2) decay a score drops by 2 per second
// of the injected clock and stops at 0.
func ExampleSketch_Query() {
	clock := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Hi: 1000, Decay: decay.Linear(2), Clock: clock})
	if err != nil {
		panic(err)
	}
	ip := []byte("203.0.113.7")
	s.Update(ip, 10)
	fmt.Println(s.Query(ip))
	clock.Advance(3 * time.Second)
	fmt.Println(s.Query(ip))
	s.Update(ip, 1)
	fmt.Println(s.Query(ip))
	clock.Advance(time.Minute)
	fmt.Println(s.Query(ip))
	// Output:
	// 10
	// 4
	// 5
	// 0
}

// TryUpdate as a rate limiter: each request costs 1 and a client may hold
// at most 3; Linear(1) decay refills one request per second.
func ExampleSketch_TryUpdate() {
	clock := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Hi: 1e6, Decay: decay.Linear(1), Clock: clock})
	if err != nil {
		panic(err)
	}
	const burst = 3
	try := func(n int) (admitted []bool) {
		for range n {
			admitted = append(admitted, s.TryUpdateString("client-42", 1, burst))
		}
		return admitted
	}
	fmt.Println(try(5))
	clock.Advance(2 * time.Second) // two requests' worth drains away
	fmt.Println(try(3))
	// Output:
	// [true true true false false]
	// [true true false]
}

// QueryDetailed shows the cell behind each level: here two keys share
// the single cell of every level, so each level holds their sum.
func ExampleSketch_QueryDetailed() {
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 1e6})
	if err != nil {
		panic(err)
	}
	s.Update([]byte("alice"), 2)
	s.Update([]byte("bob"), 5)
	d := s.QueryDetailed([]byte("alice"))
	for _, lv := range d.Levels {
		fmt.Printf("level %d cell %d: %v\n", lv.Level, lv.Index, lv.Score)
	}
	fmt.Println("aggregate:", d.Score)
	// Output:
	// level 0 cell 0: 7
	// level 1 cell 0: 7
	// level 2 cell 0: 7
	// aggregate: 7
}

// For keys chosen by untrusted clients, SipHash with a secret seed keeps
// attackers from crafting colliding keys. The string twins do not
// allocate.
func ExampleSipHash() {
	s, err := sketch.New(sketch.Config{
		Hi:     1e6,
		Hasher: sketch.SipHash(),
		Seed:   0x5eed_cafe_f00d_beef, // keep it secret, e.g. from crypto/rand
	})
	if err != nil {
		panic(err)
	}
	s.UpdateString("user:1001", 3)
	s.UpdateString("user:1001", 4)
	fmt.Println(s.QueryString("user:1001"))
	fmt.Println(s.Config().Hasher != nil, s.Config().Levels, s.Config().CellsPerLevel)
	// Output:
	// 7
	// true 4 100000
}
