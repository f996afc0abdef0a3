package main

import (
	"testing"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

func TestServer(t *testing.T) { check.Server(t, handler(check.Defaults())) }
