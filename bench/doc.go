// Package bench is the root of the measurement module
// (github.com/lfgrudge/grudge/bench, its own go.mod), so that plotting,
// hrtime and x/time/rate never reach a user's module graph. It holds the
// contention matrix (bench/matrix: the lock-free sketch, the mutex
// reference, both rotators and two peers, an atomic-add count-min and a
// sync.Map of golang.org/x/time/rate limiters, driven by pinned worker
// threads over the same keys), its command (bench/cmd/matrix, behind
// `make bench`), the go test benchmarks that compare against those peers
// (bench/sketch, bench/rotator, bench/limit), the A/B benchmarks of the
// public faces (bench/ab), the limiter's capacity runs (bench/capacity),
// the tools in bench/cmd (allowratio, backoffsum, capacity, heapplot,
// redismem, ratebench), and run16.sh, backoff16.sh and race16.sh, the
// one-shot scripts for a 16-core machine. docs/benchmarks.md has the
// numbers, the commands and the hardware they were measured on.
package bench
