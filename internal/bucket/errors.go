package bucket

import "github.com/lfgrudge/grudge/internal/core"

// newConfigError returns a *sketch.ConfigError with the "bucket" prefix,
// matched by errors.Is(err, sketch.ErrInvalidConfig) like every
// configuration error of the module.
func newConfigError(field string, value any, format string, args ...any) error {
	return core.ConfigErr("bucket", field, value, format, args...)
}
