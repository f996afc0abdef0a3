// Package capacity measures how many keys at their limit a limiter holds
// in a given memory (issue 26): N keys each take their whole burst at
// one instant, then fresh keys, never seen, ask for one token; the share
// of fresh keys denied is the limiter's rate of innocent denials at that
// load. It compares, on the same memory and in one run, the count-min
// limiter of package limit (built from its public API) and the bucketed
// engine of internal/bucket driven with the same law, and reports next
// to each measurement what the engines' models predict: the bucket
// engine's Saturation reading and capacity model (bucket.PredictDenial),
// the count-min's Bloom-filter formula (bucket.PredictCountMinDenial).
//
// bench/cmd/capacity is the command; docs/capacity.md has the numbers,
// the plots and the command that produced them. allow_test.go holds the
// Allow benchmark of the two engines (admitted and denied, interleaved
// with limit's own in docs/capacity.md).
package capacity
