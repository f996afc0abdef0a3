package asm

import (
	"testing"
)

func BenchmarkPause(b *testing.B) {
	b.Run("impl=asm", func(b *testing.B) {
		for b.Loop() {
			Pause()
		}
	})
	b.Run("impl=generic", func(b *testing.B) {
		for b.Loop() {
			pauseGeneric()
		}
	})
}
