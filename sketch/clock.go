package sketch

import "time"

// sysBase anchors the default clock; time.Since on it reads the runtime's
// monotonic clock, so the default clock never steps with wall-clock
// adjustments.
var sysBase = time.Now()

// systemMillis is the default clock: monotonic milliseconds.
func systemMillis() int64 { return int64(time.Since(sysBase) / time.Millisecond) }
