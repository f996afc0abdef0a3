// Package atom is the implementation behind package atomiccell: the
// packed word, the cell's CAS loop with its contention backoff, and the
// Rules with the batch forms the engine's hot path uses (ValueN, NextN:
// one decay dispatch for all of a key's cells; DecideN: an admitted or
// denied TryUpdate's decision and new words in one pass; Apply; Round).
// NextN's and DecideN's arithmetic for words that need no decay is SSE2
// assembly on amd64 (batch_amd64.s), with pure-Go twins (nextNGeneric,
// decideNGeneric) used elsewhere and under the purego tag, and compared
// with them by a test. atomiccell's
// package documentation states the layout and the invariants.
package atom
