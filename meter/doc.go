// Package meter holds the other three readings of the decaying-score
// sketch, next to package limit's debt meter, each per key over an
// unbounded key space in constant memory:
//
//   - Rate: events per second from an exponentially decayed counter
//     (+1 per event, Exponential(1/window)): C/window estimates the rate,
//     with a startup transient 1-exp(-t/window) and mean lag window.
//   - Inflight: requests in flight, +1 on Acquire, -1 on the Guard's
//     (idempotent) Release, no decay; TryAcquire(key, max) is exact under
//     contention (the sketch's TryUpdate) and through collisions (the
//     clamp is far above any count, so a shared cell never loses a +1).
//   - Novelty: "seen within the last T", a saturating latch (Hi = 1)
//     decaying as exp(-t/T), seen while above exp(-1): a Bloom filter that
//     forgets, for streaming dedup; exactly one of racing callers is told
//     a key is new.
//
// Keys are strings; each operation of Rate and Novelty has a short form
// at the clock's reading and one full form taking t first (ObserveAt,
// PerSecondAt, SeenAt, ContainsAt: the module's naming rule, package
// sketch, "Naming"). Inflight's counts do not decay, so its Acquire,
// TryAcquire and Count take no time.
//
// All three hash with SipHash keyed from crypto/rand by default and read
// with Min aggregation, so errors are one-sided: a collision can only
// raise a Rate or a Count, or make Novelty say "seen" (a false
// positive), never the reverse. Rate and Novelty run on the lock-free
// rotator (Period 16 windows by default, so rotation costs Rate a
// fraction exp(-16) of its steady-state count and Novelty nothing);
// Inflight on one sketch, because its counts are conserved (see
// Inflight).
//
// All three run on the count-min, not on the bucketed engine that holds
// package limit's keys (internal/bucket), which does not fit them as it
// is: an entry keeps a key's load as a 16-bit stamp of ticks, and under
// the exponential law a tick is a factor e^kappa of the load (kappa =
// 5.4e-4 for a range of 2^48), every write rounding up by one, so a
// Rate counter past about 1/kappa = 1,850 events per window grows faster
// than its events and runs away to its clamp (internal/bucket's
// TestExponentialCounter: 100 times the truth at 10,000 events per
// window), where a float32 cell rounds each write up by at most one
// float32 step (about window_ms x 2^-23 of a Rate's count, and a
// runaway of its own past about 2^24 events per window: Rate's doc);
// Inflight's counts go
// down (-1 on Release), which a stamp cannot; Novelty's latch is a
// stamp in principle ("seen while the stamp is less than T old"), a port
// not made (docs/capacity.md, "meter").
//
// Core operations (pseudo-code; s is the sketch, theta = exp(-1)):
//
//	Rate.Observe(k):      s.Update(k, 1)
//	Rate.PerSecond(k):    s.Query(k) / window.Seconds()
//	Inflight.TryAcquire:  s.TryUpdate(k, 1, max) ? guard : nil  // Hi = MaxFloat32
//	Guard.Release:        once { s.Update(k, -1) }
//	Novelty.Seen(k):      fresh := s.TryUpdate(k, 1, 1+theta); if !fresh { s.Update(k, 1) }; return !fresh
//
// # Saving and restoring
//
// Rate and Novelty implement io.WriterTo and io.ReaderFrom, so that
// package sketch/snapshot's Saver, WriteFile and Load keep them on disk
// across a restart or a deploy. The snapshot is a short header (the
// meter's kind, window and Period) and the rotator's snapshot: every
// cell with its age, the rotation deadline and the hash seed. ReadFrom
// takes it into a meter freshly built with the same window,
// PeriodWindows and size, whatever that meter's seed: the snapshot's
// seed replaces it (users never see it), so every key maps to the cells
// it had. Every counter and mark decays by the wall time elapsed since
// the snapshot (none if the restoring clock's time is earlier), so a
// restored meter reads what the never-stopped one would. Another
// configuration is refused with an error matching
// sketch.ErrSnapshotMismatch, a damaged or truncated snapshot with one
// matching sketch.ErrCorruptSnapshot (or ErrSnapshotMismatch when the
// damage is in a header field the meter compares: the checksum ends the
// stream), and the meter is then left as it
// was. WriteTo runs concurrently with everything else and stops nothing:
// each cell is one atomic load, so a snapshot under traffic is not a
// global cut (an event in flight may be in it or not; see
// sketch.Sketch.WriteTo); an encode that a rotation (the end of a
// Period) overtakes fails with an error matching sketch.ErrTakeAgain,
// and is taken again. Inflight has none (see Inflight).
//
// Errors from the constructors are *sketch.ConfigError values
// (errors.Is(err, sketch.ErrInvalidConfig)) naming the field, a nil
// Option included, and every size is bounded (WithMaxBytes); they and
// the panics on bad input start with "meter: ". The zero Rate, Inflight
// and Novelty panic ("meter: zero Rate; use NewRate") rather than
// dereference nil.
package meter
