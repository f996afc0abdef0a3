package check

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAudit129RoutesReportsFailures: Routes runs its checks as subtests
// of the caller's test, so a router that breaks them fails that test.
// Its own binary, run again as a child, gives Routes a handler with no
// limiter (every request "ok"): the child exits non-zero, runs every
// subtest (HourlyWindow skipped: on an unlimited handler it loops 200,000
// requests), and fails at least the ones that need a 429 (Denial429,
// UnroutedCharged, FixedSkipPathEncoded, FixedRedirectsUncharged).
func TestAudit129RoutesReportsFailures(t *testing.T) {
	if os.Getenv("A129_ROUTES_CHILD") == "1" {
		Routes(t, func(Flags) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		})
		return
	}
	if testing.Short() {
		t.Skip("runs its binary again")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAudit129RoutesReportsFailures$", "-test.skip", "^TestAudit129RoutesReportsFailures$/^HourlyWindow$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "A129_ROUTES_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("Routes on an unlimited handler passed:\n%s", out)
	}
	s := string(out)
	for _, name := range []string{"LoginPathVariants", "Denial429", "HealthzNeverLimited", "UnroutedCharged", "Keys",
		"ServerNoLeak", "FixedSkipPathEncoded", "FixedRedirectsUncharged"} {
		if !strings.Contains(s, "=== RUN   TestAudit129RoutesReportsFailures/"+name+"\n") {
			t.Errorf("subtest %s did not run:\n%s", name, s)
		}
	}
	for _, name := range []string{"Denial429", "UnroutedCharged", "FixedSkipPathEncoded", "FixedRedirectsUncharged"} {
		if !strings.Contains(s, "--- FAIL: TestAudit129RoutesReportsFailures/"+name+" ") {
			t.Errorf("subtest %s did not fail on an unlimited handler:\n%s", name, s)
		}
	}
}
