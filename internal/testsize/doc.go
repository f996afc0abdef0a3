// Package testsize tells the tests how large to make their sweeps.
//
// The heavy single-goroutine sweeps (oracle comparisons over grids of
// rates, times and seeds) run at full size once per `make test`, in the
// purego step, which runs the suite without -short and without the race
// detector. Everywhere else (-race, where every memory access costs about
// five times as much and the detector has nothing to find in one
// goroutine's arithmetic; -short, the arm64 suite under emulation) they
// run a sample of the same grid: Small reports which. Under an emulator
// (Emulated: the arm64 suite, about ten times slower) the slowest sweeps
// whose points are not about the architecture take a smaller sample
// still (Sample).
//
// A test that runs in one goroutine from start to end calls Serial first:
// under -race it skips, so the race step spends its time on the tests
// that have goroutines to race.
//
// Only tests import this package.
package testsize
