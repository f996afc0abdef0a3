// Package bench holds the contention benchmark matrix: the lock-free
// sketch, the mutex reference, both rotators and two peers (a plain
// atomic-add count-min and a sync.Map of golang.org/x/time/rate limiters)
// driven by pinned worker threads over the same keys, with throughput,
// latency percentiles, allocations and memory per cell.
//
// The logic lives in bench/matrix; bench/cmd/matrix is the command behind
// `make bench`; bench/run16.sh is the one-shot script for a 16-core
// machine. docs/benchmarks.md has the numbers, the commands and the
// hardware they were measured on.
package bench
