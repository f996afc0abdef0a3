//go:build !race

package limit_test

// raceOn70: audit 70's statistical tests shrink under -race.
const raceOn70 = false
