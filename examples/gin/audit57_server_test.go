package main

import (
	"testing"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

// TestAudit57Server: the gin server, as package examples' doc says.
func TestAudit57Server(t *testing.T) { check.Doc(t, handler(check.Defaults())) }
