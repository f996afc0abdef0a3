package core

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// The sentinel errors of the module; package sketch exports them.
var (
	ErrInvalidConfig    = errors.New("invalid configuration")
	ErrCorruptSnapshot  = errors.New("corrupt snapshot")
	ErrSnapshotMismatch = errors.New("snapshot does not match the configuration")
)

// ErrTakeAgain is wrapped by a WriteTo that could not capture a state a
// restore reproduces (the clock jumped during the encode and a cell
// written or re-stamped after the jump can only be stated by a stamp
// more than 2^24 ms after the instant, or the stamps read span over 2^31
// ms, or a rotator's generation set was promoted): the same call an instant
// later will. snapshot.Saver takes such a snapshot again at once.
var ErrTakeAgain = errors.New("take the snapshot again")

// newConfigError builds the error of an invalid configuration field: a
// *sketch.ConfigError, whose constructor package sketch registers at init
// (RegisterConfigError). Every package that reaches the engine imports
// sketch, so the registration has run before any configuration is
// checked.
var newConfigError func(field string, value any, msg string, cause error) error

// RegisterConfigError installs the constructor of the module's one
// configuration error type (package sketch's init calls it).
func RegisterConfigError(f func(field string, value any, msg string, cause error) error) {
	newConfigError = f
}

// configParts reads a *sketch.ConfigError's field, value, message and
// cause (ok false for any other error); package sketch registers it with
// the constructor.
var configParts func(err error) (field string, value any, msg string, cause error, ok bool)

// RegisterConfigParts installs configParts (package sketch's init calls it).
func RegisterConfigParts(f func(err error) (field string, value any, msg string, cause error, ok bool)) {
	configParts = f
}

// Prefixed returns an error of the engine (a sketch's or a rotator's
// New) as its caller's: a *sketch.ConfigError is restated as one of the
// same field, value and cause whose message names prefix instead of the
// package that made it ("sketch: Levels must be <= 8" becomes "limit:
// Levels must be <= 8"), so that a constructor documented to return a
// *sketch.ConfigError prefixed with its package's name does; any other
// error is wrapped, prefix + ": " + its text.
func Prefixed(prefix string, err error) error {
	if configParts != nil {
		if field, value, msg, cause, ok := configParts(err); ok {
			if i := strings.Index(msg, ": "); i > 0 && !strings.ContainsAny(msg[:i], " ;,") {
				msg = msg[i+2:]
			}
			return configErr(cause, prefix, field, value, "%s", msg)
		}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// ConfigErr returns the *sketch.ConfigError for field with value, whose
// message is prefix + ": " + the formatted text (errors.Is(err,
// ErrInvalidConfig)).
func ConfigErr(prefix, field string, value any, format string, args ...any) error {
	return configErr(nil, prefix, field, value, format, args...)
}

// ConfigErrCause is ConfigErr wrapping cause (its Unwrap).
func ConfigErrCause(cause error, prefix, field string, value any, format string, args ...any) error {
	return configErr(cause, prefix, field, value, format, args...)
}

// NilHasherErr is the *sketch.ConfigError, naming Hasher, of a
// HasherFactory that returned nil for seed (prefix as ConfigErr's).
func NilHasherErr(prefix string, seed uint64) error {
	return ConfigErr(prefix, "Hasher", nil, "the HasherFactory returned a nil Hasher (for seed %d)", seed)
}

func configErr(cause error, prefix, field string, value any, format string, args ...any) error {
	if newConfigError == nil {
		panic("core: no configuration error type registered (package sketch is not linked)")
	}
	return newConfigError(field, value, prefix+": "+fmt.Sprintf(format, args...), cause)
}

// IsNil reports whether v is nil or holds a nil pointer (or map, slice,
// func, channel, interface): a typed nil, which a "must not be nil"
// check on the interface alone lets through (snapshot's sources, the
// redis module's clients).
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}
