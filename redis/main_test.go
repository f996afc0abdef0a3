package redis

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: the
// rueidis clients are closed and every redis-server reaped at cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
