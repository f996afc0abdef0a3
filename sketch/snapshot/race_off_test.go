//go:build !race

package snapshot_test

const raceOn = false
