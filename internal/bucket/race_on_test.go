//go:build race

package bucket

// raceOn: the statistical tests shrink under the race detector (they are
// single-threaded; -race would only make them slow).
const raceOn = true
