// Package tests holds the tests of module github.com/lfgrudge/grudge that
// need modules the library itself does not: property tests
// (pgregory.net/rapid), linearizability checks
// (github.com/anishathalye/porcupine) and goroutine-leak checks
// (go.uber.org/goleak). Keeping them in this nested module keeps those
// modules out of a consumer's go list -m all. Each directory mirrors the
// package it tests (tests/sketch tests github.com/lfgrudge/grudge/sketch),
// and may use the engine's internal packages and test seams.
// TestConsumerModules checks the consumer's module graph.
package tests
