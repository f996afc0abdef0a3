package main

import (
	"testing"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

// TestAudit128Routes: audit 128's checks of this example through its
// router (examples/internal/check, Routes: one suite for the four).
func TestAudit128Routes(t *testing.T) { check.Routes(t, handler) }
