package asm

// pauseGeneric is the pure-Go twin of [Pause]: it does nothing. It is
// always compiled, so tests compare the two in one binary.
func pauseGeneric() {}
