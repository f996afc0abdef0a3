package sketch

import "github.com/lfgrudge/grudge/internal/core"

// Errors of the module, matched with errors.Is.
var (
	// ErrInvalidConfig is matched by every configuration error of the
	// module (a *ConfigError): sketch, rotator, the reference, limit,
	// meter, httplimit and the grudge root package.
	ErrInvalidConfig = core.ErrInvalidConfig
	// ErrCorruptSnapshot is matched by every error that reports a snapshot
	// that is not well formed: wrong magic or version, truncated, trailing
	// bytes, bad checksum, a score that is NaN, infinite or outside the
	// bounds.
	ErrCorruptSnapshot = core.ErrCorruptSnapshot
	// ErrSnapshotMismatch is matched by every error that reports a
	// well-formed snapshot (or a sketch given to Merge) whose
	// configuration differs from the receiver's.
	ErrSnapshotMismatch = core.ErrSnapshotMismatch
	// ErrTakeAgain is matched by the error of a WriteTo (sketch, rotator,
	// meter, a count-min limiter) that could not capture a state a
	// restore reproduces: the clock jumped during the encode and a cell
	// written or re-stamped after the jump can only be stated by a stamp
	// more than 2^24 ms after the instant (its value read back by the law
	// passes Hi, or it is a credit or a custom law's; see Sketch.WriteTo),
	// or the stamps read span over 2^31 ms, or a rotator's generation set
	// was promoted during it. Nothing is wrong with the receiver: the
	// same call an instant later succeeds; snapshot.Saver takes it again
	// at once.
	ErrTakeAgain = core.ErrTakeAgain
)

// ConfigError reports one invalid configuration field: its name, the
// value given, and why it is refused. Its message carries the package
// prefix, for example "sketch: CellsPerLevel must be <= 1073741824; got
// 2000000000". Every constructor of the module reports this type.
type ConfigError struct {
	Field string // the field's name, e.g. "CellsPerLevel" or "Hi" (a rotator's Sketch fields by their own names)
	Value any    // the offending value
	msg   string
	err   error // a wrapped cause (a decay law's own error), or nil
}

func (e *ConfigError) Error() string { return e.msg }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the wrapped cause, if any.
func (e *ConfigError) Unwrap() error { return e.err }

func init() {
	core.RegisterConfigError(func(field string, value any, msg string, cause error) error {
		if a, ok := value.(core.Aggregator); ok {
			value = Aggregator(a) // the engine's copy of the type: report the user's
		}
		return &ConfigError{Field: field, Value: value, msg: msg, err: cause}
	})
	core.RegisterConfigParts(func(err error) (string, any, string, error, bool) {
		if e, ok := err.(*ConfigError); ok && e != nil {
			return e.Field, e.Value, e.msg, e.err, true
		}
		return "", nil, "", nil, false
	})
	core.RegisterSketchFace(func(face any) *core.Sketch {
		if s, ok := face.(*Sketch); ok && s != nil {
			return &s.e
		}
		return nil
	})
}
