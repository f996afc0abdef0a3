package redis

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Audit 136: a review of the fixes after 6ec5861 (retrying's READONLY
// branch narrowed to "no node took the library and every refusal was
// READONLY").

// a136Node is a fake node whose FUNCTION LOAD answers load; a nil load
// marks the library as taken on the fake server.
type a136Node struct {
	address string
	load    error
	lib     *atomic.Bool
}

func (n a136Node) addr() string { return n.address }
func (n a136Node) functionLoad(context.Context, string) error {
	if n.lib != nil && (n.load == nil || strings.Contains(n.load.Error(), "already exists")) {
		n.lib.Store(true)
	}
	return n.load
}
func (n a136Node) configGet(context.Context, string) (string, error) {
	return "", errors.New("a136: not served")
}
func (n a136Node) info(context.Context, string) (string, error) {
	return "", errors.New("a136: not served")
}

// a136Conn answers FCALL with "ERR Function not found" until lib is set
// (then "ok"), or always when never is set (the call runs where the
// library never arrives: a replica whose primary lacks it).
type a136Conn struct {
	ns      []node
	nodeErr error
	lib     atomic.Bool
	never   bool
	calls   atomic.Int64
}

func (c *a136Conn) fcall(context.Context, string, []string, []string) (string, error) {
	c.calls.Add(1)
	if !c.never && c.lib.Load() {
		return "ok", nil
	}
	return "", a133ServerErr{"ERR Function not found"}
}
func (c *a136Conn) fcallStrings(context.Context, string, []string, []string) ([]string, error) {
	return nil, a133ServerErr{"ERR Function not found"}
}
func (c *a136Conn) nodes(context.Context) ([]node, error) { return c.ns, c.nodeErr }
func (c *a136Conn) concurrent() int                       { return 1 }
func (c *a136Conn) serverError(err error) (string, bool) {
	var se a133ServerErr
	if errors.As(err, &se) {
		return se.msg, true
	}
	return "", false
}

const a136Exists = "ERR Library 'grudge' already exists"

var errA136Net = errors.New("a136: dial tcp: connection refused")

// a136Answer builds node answers: "ok", "exists", "ro", "noperm", "oom",
// "net".
func a136Answer(kind string) error {
	switch kind {
	case "ok":
		return nil
	case "exists":
		return a133ServerErr{a136Exists}
	case "ro":
		return a133ServerErr{a133ReadOnly}
	case "noperm":
		return a133ServerErr{a133NoPerm}
	case "oom":
		return a133ServerErr{a133OOM}
	case "net":
		return errA136Net
	}
	panic(kind)
}

// TestAudit136LoadMatrix: every combination of one or two node answers to
// FUNCTION LOAD (OK, already exists, READONLY, NOPERM, OOM, a network
// error), on a standalone node (one node) and on a primary beside its
// replica or two (a cluster client that lists replicas), with the
// retried FCALL either finding the library where a node loaded it or had
// it (the call runs there) or not (never, or only READONLY answers: the
// call runs on a replica whose primary lacks it). Checked for each:
//   - no node took it (every answer NOPERM/OOM/network): one FCALL, the
//     load's failures returned, each named by node, NOPERM as
//     ErrPermission, a network error wrapped (errors.Is), never
//     ErrNoFunctions and never READONLY text;
//   - a node took it and the retried call finds it: nil after 2 FCALLs;
//   - the retried call finds no library: ErrNoFunctions with the
//     "point the client at the primary" advice exactly when every answer
//     was READONLY (every replica named); otherwise the other nodes'
//     failures are in the error (ErrPermission for NOPERM, the network
//     error wrapped, the OOM text) and no replica is blamed.
func TestAudit136LoadMatrix(t *testing.T) {
	kinds := []string{"ok", "exists", "ro", "noperm", "oom", "net"}
	var sets [][]string
	for _, a := range kinds {
		sets = append(sets, []string{a})
		for _, b := range kinds {
			sets = append(sets, []string{a, b})
			sets = append(sets, []string{a, b, "ro"})
		}
	}
	for _, set := range sets {
		for _, never := range []bool{false, true} {
			conn := &a136Conn{never: never}
			took, allRO, here := false, true, false
			for i, k := range set {
				addr := "node" + string(rune('a'+i)) + ":6379"
				conn.ns = append(conn.ns, a136Node{address: addr, load: a136Answer(k), lib: &conn.lib})
				switch k {
				case "ok", "exists", "ro":
					took = true
					here = here || k != "ro"
				}
				if k != "ro" {
					allRO = false
				}
			}
			name := strings.Join(set, "+")
			if never {
				name += "/never"
			}
			err := a136Fcall(t, conn)
			calls := conn.calls.Load()
			switch {
			case !took:
				if err == nil || calls != 1 {
					t.Errorf("%s: %v after %d FCALLs; want the load's failure after 1", name, err, calls)
					continue
				}
			case !never && here:
				if err != nil || calls != 2 {
					t.Errorf("%s: %v after %d FCALLs; want nil after 2", name, err, calls)
				}
				continue
			default:
				if err == nil || calls != 2 {
					t.Errorf("%s: %v after %d FCALLs; want an error after 2", name, err, calls)
					continue
				}
			}
			msg := err.Error()
			replicaBlamed := errors.Is(err, ErrNoFunctions) && strings.Contains(msg, "point the client at the primary")
			if want := allRO; replicaBlamed != want {
				t.Errorf("%s: replica blamed %v, want %v: %v", name, replicaBlamed, want, err)
			}
			if replicaBlamed {
				for _, n := range conn.ns {
					if !strings.Contains(msg, n.addr()) {
						t.Errorf("%s: replica %s not named: %v", name, n.addr(), err)
					}
				}
				continue
			}
			if errors.Is(err, ErrNoFunctions) {
				t.Errorf("%s: ErrNoFunctions for a server that has Functions: %v", name, err)
			}
			for i, k := range set {
				addr := conn.ns[i].addr()
				switch k {
				case "noperm":
					if !errors.Is(err, ErrPermission) || !strings.Contains(msg, addr) {
						t.Errorf("%s: NOPERM on %s not reported as ErrPermission: %v", name, addr, err)
					}
				case "oom":
					if !strings.Contains(msg, "OOM") || !strings.Contains(msg, addr) {
						t.Errorf("%s: OOM on %s not reported: %v", name, addr, err)
					}
				case "net":
					if !errors.Is(err, errA136Net) || !strings.Contains(msg, addr) {
						t.Errorf("%s: network error on %s not wrapped: %v", name, addr, err)
					}
				}
			}
		}
	}
}

// a136Fcall runs one FCALL through a Sketch over c.
func a136Fcall(t *testing.T, c conn) error {
	t.Helper()
	s, err := newSketch(c, Config{Name: "a136", Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.fcall(context.Background(), s.keys[0], []string{"Q"})
	return err
}

// TestAudit136NodeListFailure: a node list that fails (a cluster client
// whose ForEachShard fails) is returned after one FCALL, wrapped
// (errors.Is), and is not taken for a missing-Functions server; a client
// that lists no node returns the server's own "Function not found".
func TestAudit136NodeListFailure(t *testing.T) {
	conn := &a136Conn{nodeErr: errA136Net}
	err := a136Fcall(t, conn)
	if !errors.Is(err, errA136Net) || errors.Is(err, ErrNoFunctions) || conn.calls.Load() != 1 ||
		!strings.Contains(err.Error(), "listing the nodes") {
		t.Errorf("node list failure: %v after %d FCALLs; want the list error wrapped after 1", err, conn.calls.Load())
	}
	conn = &a136Conn{}
	err = a136Fcall(t, conn)
	if err == nil || !strings.Contains(err.Error(), "Function not found") || conn.calls.Load() != 1 {
		t.Errorf("no node: %v after %d FCALLs; want the server's reply after 1", err, conn.calls.Load())
	}
}

// TestAudit136RealReplicaSketch: a Sketch (New/NewGoRedis, no Check)
// over a real read-only replica whose primary never loaded the library,
// with both clients: Update fails with ErrNoFunctions naming the
// replica's address and saying READONLY; after the primary loads it (a
// limiter's start there) and the replica has it, Query on the replica is
// no longer ErrNoFunctions. Skipped under -short.
func TestAudit136RealReplicaSketch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			primary, replica := a131Replica(t, lib, false)
			re := a131Env(t, lib, replica)
			s := re.sketch(t, Config{Name: "a131ro", Hi: 100})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Update(ctx, "k", 1)
			if !errors.Is(err, ErrNoFunctions) || !strings.Contains(err.Error(), replica.addr()) ||
				!strings.Contains(err.Error(), "READONLY") {
				t.Fatalf("Update on a replica without the library: %v; want ErrNoFunctions naming %s (READONLY)", err, replica.addr())
			}
			a131Env(t, lib, primary).limiter(t, LimiterConfig{Name: "a131ro", Limit: PerSecond(10, 10),
				CellsPerLevel: 1000, Timeout: 2 * time.Second})
			a131Sync(t, primary, replica)
			if _, err := s.Query(ctx, "k"); errors.Is(err, ErrNoFunctions) {
				t.Errorf("Query on the replica once it has the library: %v", err)
			}
		})
	}
}

// TestAudit136FixedDistributedDocReadOnlyOverstated (audit 136; fixed at
// stop 64 in the docs, the text below says what was wrong):
// docs/distributed.md said "A call that still finds no library after a
// load a node refused with READONLY (a client pointed at a read-only
// replica whose primary never loaded it) fails with `ErrNoFunctions`
// naming the replica", while since a3c9faf the code gives that error only
// where no node took the library and every refusal was READONLY: a
// primary refusing the load with NOPERM (or OOM, or unreachable) beside
// its READONLY replica gives ErrPermission (or the server's "Function not
// found" with the OOM/network cause appended). The doc now says "every
// node refused with READONLY ... where a node refused it for another
// reason (NOPERM, OOM, a network error), that reason is the error", which
// this checks, with the doc's wording.
func TestAudit136FixedDistributedDocReadOnlyOverstated(t *testing.T) {
	doc, err := os.ReadFile("../docs/distributed.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(doc)), " ")
	if !strings.Contains(flat, "every node refused with READONLY") || !strings.Contains(flat, "that reason is the error") {
		t.Errorf("docs/distributed.md no longer states the READONLY rule this test checks")
	}
	for _, primary := range []string{"noperm", "oom", "net"} {
		conn := &a136Conn{never: true, ns: []node{
			a136Node{address: "primary:6379", load: a136Answer(primary)},
			a136Node{address: "replica:6380", load: a136Answer("ro")},
		}}
		err := a136Fcall(t, conn)
		if errors.Is(err, ErrNoFunctions) {
			t.Errorf("primary %s + READONLY replica: %v; want the primary's reason, not ErrNoFunctions", primary, err)
		}
		want := map[string]string{"noperm": "NOPERM", "oom": "OOM", "net": "connection refused"}[primary]
		if !strings.Contains(err.Error(), want) || primary == "noperm" && !errors.Is(err, ErrPermission) {
			t.Errorf("primary %s + READONLY replica: %v; want the primary's reason (%s)", primary, err, want)
		}
	}
	conn := &a136Conn{never: true, ns: []node{a136Node{address: "replica:6380", load: a136Answer("ro")}}}
	if err := a136Fcall(t, conn); !errors.Is(err, ErrNoFunctions) || !strings.Contains(err.Error(), "replica:6380") {
		t.Errorf("a lone READONLY replica: %v; want ErrNoFunctions naming it", err)
	}
}

// TestAudit136ZeroPanicTexts: sketch.go's doc "The zero Sketch is not
// usable: its operations and Check panic ("redis: zero Sketch; use
// New")" and limiter.go's "its decisions panic ("redis: zero Limiter;
// use NewLimiter")": with valid arguments, each operation panics with
// exactly that text (TryUpdate even with a NaN delta: the key is hashed
// first).
func TestAudit136ZeroPanicTexts(t *testing.T) {
	ctx := context.Background()
	var zs Sketch
	var zl Limiter
	const sk, lim = "redis: zero Sketch; use New", "redis: zero Limiter; use NewLimiter"
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Check":            {func() { _ = zs.Check(ctx) }, sk},
		"Update":           {func() { _ = zs.Update(ctx, "k", 1) }, sk},
		"UpdateAndQuery":   {func() { _, _ = zs.UpdateAndQuery(ctx, "k", 1) }, sk},
		"Query":            {func() { _, _ = zs.Query(ctx, "k") }, sk},
		"TryUpdate":        {func() { _, _ = zs.TryUpdate(ctx, "k", 1, 2) }, sk},
		"TryUpdate NaN":    {func() { _, _ = zs.TryUpdate(ctx, "k", math.NaN(), 2) }, sk},
		"Allow":            {func() { _, _ = zl.Allow(ctx, "k") }, lim},
		"AllowN":           {func() { _, _ = zl.AllowN(ctx, "k", 2) }, lim},
		"DecideContext(1)": {func() { _, _ = zl.DecideContext(ctx, "k", 1) }, lim},
	} {
		if got := a133Panic(c.f); got != c.want {
			t.Errorf("%s on the zero value: panic %q, want %q", name, got, c.want)
		}
	}
}
