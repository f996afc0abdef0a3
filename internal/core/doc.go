// Package core is the engine under the public packages sketch and
// rotator: the lock-free sketch (cells, the horizon sweep, TryUpdate's
// stripes and roll-backs, hashed handles, prefetch, receipts and
// refunds, the time base, the snapshot format, merge) and the rotator
// (generation sets, promotion on access, reservations).
//
// sketch.Sketch and rotator.Rotator hold the engine by value and forward
// to it in one-line methods that inline; packages limit, meter and the
// grudge root package drive it directly, for what the public surface does
// not carry (reservations, refunds, manual rotation). Package sketch's
// documentation states the guarantees; docs/design.md argues them.
//
// The configuration types here mirror package sketch's (Config,
// Aggregator, Hasher, Clock): the faces convert at construction, and
// errors are package sketch's *ConfigError (RegisterConfigError).
package core
