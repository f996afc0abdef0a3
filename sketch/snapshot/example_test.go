package snapshot_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// A service loads its last snapshot at start (carrying on empty, with the
// error logged, when there is none or it is damaged), saves every minute,
// and once more on shutdown.
func Example() {
	dir, _ := os.MkdirTemp("", "grudge")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "scores.snap")
	cfg := sketch.Config{Hi: 1e9}

	for run := 1; run <= 2; run++ {
		s, err := sketch.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		if err := snapshot.Load(path, s); errors.Is(err, snapshot.ErrNoSnapshot) {
			fmt.Println("run", run, "first start")
		} else if err != nil {
			fmt.Println("run", run, "starting empty:", err)
		}
		saver, err := snapshot.NewSaver(path, time.Minute, s, snapshot.OnError(func(err error) { log.Print(err) }))
		if err != nil {
			log.Fatal(err)
		}
		s.UpdateString("carol", 1)
		fmt.Println("run", run, "carol =", s.QueryString("carol"))
		if err := saver.Close(); err != nil { // the final snapshot
			log.Print(err)
		}
	}
	// Output:
	// run 1 first start
	// run 1 carol = 1
	// run 2 carol = 2
}
