package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/testchild"
)

const a104ChildEnv = "GRUDGE_A104_LIMIT_CHILD"

// a104Child runs body in a child process of this test binary (a tiny
// debt's NextAfter search hung decisions before 3094000, and a fix could
// hang again); in the child it runs body itself. The child's failures
// are the test's.
func a104Child(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a104ChildEnv, body)
}
