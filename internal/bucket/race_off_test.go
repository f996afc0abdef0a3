//go:build !race

package bucket

const raceOn = false
