package sketch

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is matched by every configuration error of this module
// (sketch, rotator, the reference, the grudge root package):
// errors.Is(err, ErrInvalidConfig).
var ErrInvalidConfig = errors.New("invalid configuration")

// ConfigError reports one invalid Config field: its name, the value
// given, and why it is refused. Its message carries the package prefix,
// for example "sketch: CellsPerLevel must be <= 1073741824; got 2000000000".
type ConfigError struct {
	Field string // the field's name, e.g. "CellsPerLevel" or "Sketch.Hi"
	Value any    // the offending value
	msg   string
	err   error // a wrapped cause (a decay law's own error), or nil
}

// NewConfigError returns a *ConfigError for field with value, whose
// message is prefix + ": " + the formatted text. Packages that validate
// configurations of their own (rotator, reference) use it so that every
// error has one type.
func NewConfigError(prefix, field string, value any, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Value: value, msg: prefix + ": " + fmt.Sprintf(format, args...)}
}

func (e *ConfigError) Error() string { return e.msg }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the wrapped cause, if any.
func (e *ConfigError) Unwrap() error { return e.err }
