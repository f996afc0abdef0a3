// Command capacity measures the innocent-denial rate of the count-min
// limiter and of the bucketed engine on the same memory, against the
// number of keys held at full debt (package bench/capacity; issue 26):
//
//	go run ./bench/cmd/capacity -plot docs/img
//
// prints a markdown table (and -csv writes the rows); -plot writes
// capacity-denied.png and capacity-got.png into the folder given.
//
//	go run ./bench/cmd/capacity -sizing 100000,1000000,10000000
//
// prints the sizing table instead: the memory bucket.Suggest and
// bucket.SuggestCountMin pick for each count and -deny rate, and the rate
// measured at that size.
//
//	go run ./bench/cmd/capacity -mixed -keys 100000,300000,1000000
//
// prints the mixed-debt table: keys asking for mixed numbers of tokens,
// count-min with and without conservative update, and limit's default.
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lfgrudge/grudge/bench/capacity"
	"github.com/lfgrudge/grudge/internal/bucket"
)

func main() {
	keysFlag := flag.String("keys", "10000,100000,300000,1000000,1200000,1300000,1400000,1500000,2000000,3000000,10000000", "numbers of keys at full debt, comma-separated")
	fresh := flag.Int("fresh", 100_000, "fresh keys asking for one token after them (each admitted one writes)")
	peek := flag.Int("peek", 1_000_000, "fresh keys peeking (read only) at the state the keys left")
	seed := flag.Uint64("seed", 1, "hash seed of every limiter")
	plotDir := flag.String("plot", "", "folder for capacity-denied.png and capacity-got.png (none if empty)")
	csvPath := flag.String("csv", "", "file for the rows as CSV (none if empty)")
	sizing := flag.String("sizing", "", "instead: sizing table for these key counts (comma-separated) at -deny rates")
	denyFlag := flag.String("deny", "0.001,0.01", "sizing: acceptable fresh-key denial rates, comma-separated")
	maxCM := flag.Int("maxcountmin", 512<<20, "sizing: measure a count-min only up to this many bytes")
	mixed := flag.Bool("mixed", false, "instead: the mixed-debt table (count-min with and without conservative update, limit's default) for -keys")
	flag.Parse()
	if *sizing != "" {
		runSizing(ints(*sizing), floats(*denyFlag), *peek, *maxCM, *seed)
		return
	}
	counts := ints(*keysFlag)
	if *mixed {
		runMixed(counts, *peek, *seed)
		return
	}
	makers := []capacity.Maker{
		capacity.CountMin("count-min (WithEngine(CountMin))", 0, 0, false),
		capacity.Limit("limit default (Buckets)"),
		capacity.CountMin("count-min 8 MiB", 4, 131072, false),
		capacity.Bucket("bucket 8 MiB", 8<<20),
	}
	fmt.Printf("# capacity: %s\n\n", meta())
	var rows []capacity.Row
	for _, n := range counts {
		for _, m := range makers {
			r, err := capacity.Measure(m, n, *peek, *fresh, *seed)
			if err != nil {
				log.Fatal(err)
			}
			rows = append(rows, r)
			fmt.Fprintf(os.Stderr, "%-26s %9d keys: got %8.4f%%  fresh denied %8.4f%% (ask %8.4f%%)  saturation %8.4f%%  model %8.4f%%  %v\n",
				r.Subject, r.Keys, 100*r.Got, 100*r.PeekDenied, 100*r.AskDenied, 100*r.Saturation, 100*r.PredictDenied, r.Elapsed.Round(time.Millisecond))
		}
	}
	printTable(rows, makers)
	if *csvPath != "" {
		if err := writeCSV(*csvPath, rows); err != nil {
			log.Fatal(err)
		}
	}
	if *plotDir != "" {
		if err := capacity.Plot(rows, filepath.Join(*plotDir, "capacity-denied.png"), filepath.Join(*plotDir, "capacity-got.png")); err != nil {
			log.Fatal(err)
		}
	}
}

func ints(list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("capacity: bad count %q", f)
		}
		out = append(out, n)
	}
	return out
}

func floats(list string) []float64 {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0 && x < 1) {
			log.Fatalf("capacity: bad rate %q", f)
		}
		out = append(out, x)
	}
	return out
}

// runMixed prints the mixed-debt table: for each mix and key count, the
// fresh-key denial rate (peek) and the share of keys admitted, for the
// default count-min, the same with conservative update, and limit's
// default (Buckets), all on limit's default memory.
func runMixed(counts []int, peek int, seed uint64) {
	fmt.Printf("# capacity -mixed: %s\n\n", meta())
	makers := []capacity.Maker{
		capacity.CountMin("count-min", 0, 0, false),
		capacity.CountMin("count-min, conservative", 0, 0, true),
		capacity.Limit("limit default (Buckets)"),
	}
	fmt.Println("| mix | keys | count-min: fresh denied | got | conservative: fresh denied | got | saturation reading | Buckets: fresh denied | got |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, mix := range []capacity.Mix{capacity.Full, capacity.Uniform, capacity.Heavy10} {
		for _, n := range counts {
			var rs []capacity.MixRow
			for _, m := range makers {
				r, err := capacity.MeasureMix(m, mix, n, peek, seed)
				if err != nil {
					log.Fatal(err)
				}
				rs = append(rs, r)
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", mix.Name, n, pct(rs[0].PeekDenied), pct(rs[0].Got),
				pct(rs[1].PeekDenied), pct(rs[1].Got), pct(rs[1].Saturation), pct(rs[2].PeekDenied), pct(rs[2].Got))
			fmt.Fprintf(os.Stderr, "mixed %s %d done\n", mix.Name, n)
		}
	}
}

// runSizing prints, for each key count and rate, the geometry Suggest
// and SuggestCountMin pick and the rate measured at it (keys at their
// burst, then peek fresh keys), and the share that got their burst.
func runSizing(counts []int, rates []float64, peek, maxCM int, seed uint64) {
	fmt.Printf("# capacity -sizing: %s\n\n", meta())
	fmt.Println("| keys at full debt | target | bucket: lines | bucket: memory | bytes/key | measured denied | got burst | count-min: L x M | count-min: memory (2 generations) | measured denied | got burst |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range counts {
		for _, p := range rates {
			g, err := bucket.Suggest(n, p)
			if err != nil {
				log.Fatal(err)
			}
			rb, err := capacity.Measure(capacity.Bucket("bucket", g.Bytes), n, peek, 1, seed)
			if err != nil {
				log.Fatal(err)
			}
			c, err := bucket.SuggestCountMin(n, p, 2)
			if err != nil {
				log.Fatal(err)
			}
			cmDenied, cmGot := "not run", ""
			if c.Bytes <= maxCM {
				rc, err := capacity.Measure(capacity.CountMin("count-min", c.Levels, c.Cells, false), n, peek, 1, seed)
				if err != nil {
					log.Fatal(err)
				}
				cmDenied, cmGot = pct(rc.PeekDenied), pct(rc.Got)
			}
			fmt.Printf("| %d | %s | %d | %s | %.1f | %s | %s | %d x %d | %s | %s | %s |\n", n, pct(p), g.Lines, capacity.MiB(rb.Bytes),
				float64(rb.Bytes)/float64(n), pct(rb.PeekDenied), pct(rb.Got), c.Levels, c.Cells, capacity.MiB(c.Bytes), cmDenied, cmGot)
			fmt.Fprintf(os.Stderr, "sizing %d keys at %v done\n", n, p)
		}
	}
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	if 100*x < 0.1 {
		return fmt.Sprintf("%.4f%%", 100*x)
	}
	return fmt.Sprintf("%.3f%%", 100*x)
}

func printTable(rows []capacity.Row, makers []capacity.Maker) {
	fmt.Printf("| limiter | memory | keys at full debt | got their burst | fresh denied (peek, %d keys) | fresh denied (ask, %d keys) | saturation reading | model: denied | model: got |\n", rows[0].Peek, rows[0].Fresh)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, m := range makers {
		for _, r := range rows {
			if r.Subject != m.Name {
				continue
			}
			fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", r.Subject, capacity.MiB(r.Bytes), r.Keys,
				pct(r.Got), pct(r.PeekDenied), pct(r.AskDenied), pct(r.Saturation), pct(r.PredictDenied), pct(r.PredictGot))
		}
	}
}

func writeCSV(path string, rows []capacity.Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"subject", "bytes", "keys", "got", "peek_denied", "ask_denied", "peek", "fresh", "saturation", "model_denied", "model_got", "elapsed_s"})
	for _, r := range rows {
		_ = w.Write([]string{r.Subject, strconv.Itoa(r.Bytes), strconv.Itoa(r.Keys), ftoa(r.Got), ftoa(r.PeekDenied), ftoa(r.AskDenied),
			strconv.Itoa(r.Peek), strconv.Itoa(r.Fresh), ftoa(r.Saturation), ftoa(r.PredictDenied), ftoa(r.PredictGot), ftoa(r.Elapsed.Seconds())})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }

// meta is the run's machine, Go version and commit.
func meta() string {
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s, commit %s, %s", cpuModel(), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, commit, time.Now().UTC().Format(time.RFC3339))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
