//go:build race

package snapshot_test

// raceOn: the crash test's child runs a smaller limiter under the race
// detector, which slows it tenfold.
const raceOn = true
