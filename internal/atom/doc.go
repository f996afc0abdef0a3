// Package atom is the implementation behind package atomiccell: the
// packed word, the cell's CAS loop with its contention backoff, and the
// Rules with the batch forms the engine's hot path uses (ValueN, NextN:
// one decay dispatch for all of a key's cells; Apply; Round). atomiccell's
// package documentation states the layout and the invariants.
package atom
