package sketch

import "github.com/lfgrudge/grudge/asm"

// systemMillis is the default clock: the runtime's monotonic clock
// (runtime nanotime, the clock behind time.Since) in milliseconds. It
// never steps with wall-clock adjustments.
//
// asm.Clock (RDTSCP, calibrated) is not the default: in the sketch's
// Update it measured no faster than nanotime on the 2-core KVM machine
// (docs/design.md, "Clock"), and the rule for adopting it is a win on
// both that machine and a 16-core server, whose run is pending. Users can
// pass asm.NewClock() as Config.Clock.
func systemMillis() int64 { return asm.Nanotime() / 1e6 }
