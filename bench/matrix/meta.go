package matrix

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
)

// cpuModel returns the CPU's name from /proc/cpuinfo ("model name" on
// x86; on arm64, which has none, the implementer and part numbers), or
// "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	var impl, part string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name", "Model", "cpu model":
			if v != "" {
				return v
			}
		case "CPU implementer":
			impl = v
		case "CPU part":
			part = v
		}
	}
	if impl != "" || part != "" {
		return "implementer " + impl + " part " + part
	}
	return "unknown"
}

// gitCommit returns override if set, else `git rev-parse --short HEAD`,
// else the build's vcs.revision, else "unknown".
func gitCommit(override string) string {
	if override != "" {
		return override
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		if c := strings.TrimSpace(string(out)); c != "" {
			return c
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// UsableCPUs is the number of CPUs a run may use: the calling thread's
// CPU affinity set (workers are pinned within it; NumCPU where it cannot
// be read), or fewer under a cgroup CPU quota, as Go's default GOMAXPROCS
// (since Go 1.25) counts it, whatever the GOMAXPROCS environment variable
// says (the run sets GOMAXPROCS to each P itself). A container limited to
// 2 CPUs on a 64-core host so grades its P=16 targets "needs 16 CPUs"
// instead of measuring them throttled, and a process started on CPU 0
// alone reports 1 CPU and its P=2 cells oversubscribed.
func UsableCPUs() int {
	n := len(hw.AllowedCPUs())
	if n == 0 {
		n = runtime.NumCPU()
	}
	return min(n, defaultGOMAXPROCS())
}

// defaultGOMAXPROCS is the runtime's default GOMAXPROCS, ignoring the
// environment variable, read once per process (concurrent calls would
// interleave their set and restore). GOMAXPROCS is left as it was (and
// where it already was the default, so are its automatic updates).
var defaultGOMAXPROCS = sync.OnceValue(func() int {
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	d := runtime.GOMAXPROCS(0)
	if d != prev {
		runtime.GOMAXPROCS(prev)
	}
	return d
})

// baseMeta fills the machine fields of Meta.
func baseMeta(o *Options) Meta {
	return Meta{
		CPUModel:  cpuModel(),
		Cores:     UsableCPUs(),
		GOARCH:    runtime.GOARCH,
		GOOS:      runtime.GOOS,
		GoVersion: runtime.Version(),
		Commit:    gitCommit(o.Commit),
		Date:      time.Now().UTC().Format(time.RFC3339),
		Command:   command(os.Args),
	}
}

// command renders the command line so that it can be pasted into a
// POSIX shell and run again: each argument that is empty or holds a
// character the shell would split or expand is single-quoted (see
// shellQuote); a binary that go run built in a temporary folder is shown
// as the go run command. The first word is quoted also when it holds a
// '=', which shellQuote leaves bare: a POSIX shell reads a leading
// NAME=value as a variable assignment (XCU 2.9.1) and would run the next
// argument as the command; quoted, it is the command word.
func command(args []string) string {
	if len(args) == 0 {
		return ""
	}
	name := shellQuote(args[0])
	if name == args[0] && strings.Contains(name, "=") {
		// Bare, so free of single quotes: wrapping it is enough.
		name = "'" + name + "'"
	}
	if strings.Contains(args[0], "go-build") {
		name = "go run ./cmd/matrix"
	}
	words := []string{name}
	for _, a := range args[1:] {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// shellQuote returns a as one POSIX shell word: unchanged when it is
// non-empty and made only of letters, digits and @%+=:,./_- (as Python's
// shlex.quote), else in single quotes, each ' in it ending the quotes,
// escaped with a backslash and the quotes begun again. Without the quotes
// an empty argument (run16.sh's -out "") vanishes and one with a blank
// splits in two.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
