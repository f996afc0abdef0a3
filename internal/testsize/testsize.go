package testsize

import "testing"

// Small reports whether a sweep should run its reduced sample: under
// -short or under the race detector.
func Small() bool { return Race || testing.Short() }

// Stride returns 1 at full size and k under Small: a sweep that steps by
// Stride(k) visits every k-th point of its grid in the reduced runs.
func Stride(k int) int {
	if Small() {
		return k
	}
	return 1
}

// Pick returns n at full size and small under Small.
func Pick(n, small int) int {
	if Small() {
		return small
	}
	return n
}

// Keep reports whether point i of a sweep runs: every point at full size,
// every k-th (i%k == 0) under Small.
func Keep(i, k int) bool { return !Small() || i%k == 0 }
