package core_test

import (
	"errors"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// TestConfigErrorMessages lists every bad input with its exact message;
// each is a *ConfigError naming the field, matched by ErrInvalidConfig.
func TestConfigErrorMessages(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		cfg   core.Config
		field string
		msg   string
	}{
		{core.Config{}, "Hi", "sketch: Hi must be set: scores are clamped to [Lo, Hi] and Lo = Hi = 0 leaves no room (for example Hi: 1e9); got Lo=0, Hi=0"},
		{core.Config{Lo: 5, Hi: 1}, "Hi", "sketch: Hi must be > Lo; got Lo=5, Hi=1"},
		{core.Config{Lo: 1, Hi: 2}, "Lo", "sketch: Lo must be <= 0; got 1"},
		{core.Config{Lo: -2, Hi: -1}, "Hi", "sketch: Hi must be >= 0; got -1"},
		{core.Config{Hi: 1e39}, "Hi", "sketch: Hi must be within the float32 range (<= 3.4028234663852886e+38) or +Inf; got 1e+39"},
		{core.Config{Lo: -1e39, Hi: 1}, "Lo", "sketch: Lo must be within the float32 range (>= -3.4028234663852886e+38) or -Inf; got -1e+39"},
		{core.Config{Hi: inf}, "Hi", "sketch: Hi = +Inf needs a Decay that drains; got Hi=+Inf with none decay"},
		{core.Config{Levels: 9, Hi: 1}, "Levels", "sketch: Levels must be <= 8; got 9"},
		{core.Config{CellsPerLevel: 1<<30 + 1, Hi: 1}, "CellsPerLevel", "sketch: CellsPerLevel must be <= 1073741824; got 1073741825"},
		{core.Config{Levels: 8, CellsPerLevel: 1 << 30, Hi: 1}, "CellsPerLevel", "sketch: Levels x CellsPerLevel = 8 x 1073741824 needs 68719476736 bytes of cells, above MaxBytes 4294967296; raise MaxBytes or shrink the sketch"},
		{core.Config{Hi: 1, MaxBytes: -1}, "MaxBytes", "sketch: MaxBytes must be >= 0 (0 means 4294967296); got -1"},
		{core.Config{Hi: 1, Aggregator: 3}, "Aggregator", "sketch: Aggregator must be Min, Max or Mean; got Aggregator(3)"},
		{core.Config{Hi: 1, Decay: decay.Linear(0)}, "Decay", "sketch: Decay is invalid: decay: Linear rate must be finite and > 0; got 0"},
	}
	for _, tt := range tests {
		_, err := tt.cfg.Normalize()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("Normalize(%+v) = %v, want a *sketch.ConfigError matching ErrInvalidConfig", tt.cfg, err)
			continue
		}
		if ce.Field != tt.field || err.Error() != tt.msg {
			t.Errorf("Normalize(%+v):\n got field %q, %q\nwant field %q, %q", tt.cfg, ce.Field, err.Error(), tt.field, tt.msg)
		}
	}
}
