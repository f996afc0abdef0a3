//go:build !race

package limit

const audit72Race = false
