// Package testhook runs a test's code at a chosen point of an encode: a
// Writer passed to WriteTo calls its hook just before the N-th write, so
// a test can move a clock, write a key or end a Period while a snapshot
// is being taken, deterministically (what a slow disk or network lets
// happen). It is used only by tests.
//
// Where the writes fall, as the encoders are written today:
//   - a sketch writes its header first (Write 1), before it loads any
//     cell;
//   - a rotator writes its header first (Write 1: its generation set is
//     loaded and its instant read), then each generation's header,
//     cells and sum;
//   - a meter (and a count-min limiter) writes its own header (Write 1),
//     then the rotator's (Write 2), then the generations.
package testhook
