//go:build !race

package testsize

// Race reports whether the binary was built with -race.
const Race = false
