package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/lfgrudge/grudge/internal/core"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// conn is what a Sketch needs of a Redis client. Two adapters implement
// it: rueidisConn (rueidis.Client, standalone or cluster) and goredisConn
// (go-redis v9's UniversalClient: Client, ClusterClient, Ring, failover).
// Neither retries an FCALL on its own (see Sketch.fcall for the replies
// after which the sketch calls again), except go-redis's own retry after a
// network error, which docs/distributed.md discusses.
type conn interface {
	// fcall runs FCALL fn with keys and args and returns the function's
	// reply, a bulk string.
	fcall(ctx context.Context, fn string, keys, args []string) (string, error)
	// fcallStrings runs FCALL fn and returns its reply as a list of
	// strings (the check operation's answer).
	fcallStrings(ctx context.Context, fn string, keys, args []string) ([]string, error)
	// nodes returns every node the client knows (primaries and, where
	// the client tracks them, replicas), sorted by address.
	nodes(ctx context.Context) ([]node, error)
	// concurrent is how many calls the client runs at once with none
	// waiting for a connection: rueidis pipelines them (no bound of its
	// own), go-redis holds one pooled connection per call (its PoolSize;
	// 1 for a client of unknown type). Check runs at most that many.
	concurrent() int
	// serverError reports whether err is a reply from the server (an
	// error reply: the server ran the command, or refused it before
	// running it) rather than a network, context or client error, and
	// its text.
	serverError(err error) (string, bool)
}

// node is one server, for the start-up checks and FUNCTION LOAD.
type node interface {
	addr() string
	functionLoad(ctx context.Context, code string) error
	configGet(ctx context.Context, param string) (string, error)
	info(ctx context.Context, section string) (string, error)
}

// --- rueidis ---

type rueidisConn struct{ c rueidis.Client }

func (r rueidisConn) fcall(ctx context.Context, fn string, keys, args []string) (string, error) {
	c := r.c
	return c.Do(ctx, c.B().Fcall().Function(fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).ToString()
}

func (r rueidisConn) fcallStrings(ctx context.Context, fn string, keys, args []string) ([]string, error) {
	c := r.c
	return c.Do(ctx, c.B().Fcall().Function(fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).AsStrSlice()
}

func (rueidisConn) concurrent() int { return math.MaxInt }

func (r rueidisConn) nodes(context.Context) ([]node, error) {
	var ns []node
	for addr, c := range r.c.Nodes() {
		ns = append(ns, rueidisNode{address: addr, c: c})
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].addr() < ns[j].addr() })
	return ns, nil
}

func (rueidisConn) serverError(err error) (string, bool) {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.Error(), true
	}
	return "", false
}

type rueidisNode struct {
	address string
	c       rueidis.Client
}

func (n rueidisNode) addr() string { return n.address }

func (n rueidisNode) functionLoad(ctx context.Context, code string) error {
	return n.c.Do(ctx, n.c.B().FunctionLoad().FunctionCode(code).Build()).Error()
}

func (n rueidisNode) configGet(ctx context.Context, param string) (string, error) {
	m, err := n.c.Do(ctx, n.c.B().ConfigGet().Parameter(param).Build()).AsStrMap()
	if err != nil {
		return "", err
	}
	v, ok := m[param]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter in the reply", param)
	}
	return v, nil
}

func (n rueidisNode) info(ctx context.Context, section string) (string, error) {
	return n.c.Do(ctx, n.c.B().Info().Section(section).Build()).ToString()
}

// errNilClient is the constructors' error for a nil client.
var errNilClient = fmt.Errorf("%w: client must not be nil", ErrInvalidConfig)

// --- go-redis ---

type goredisConn struct{ c goredis.UniversalClient }

// newGoredisConn checks that go-redis honours context deadlines (its
// ContextTimeoutEnabled option; without it a call waits for the client's
// ReadTimeout whatever the context says, so Config.Timeout and the
// failure policies' deadlines would be silently ignored).
func newGoredisConn(c goredis.UniversalClient) (goredisConn, error) {
	if core.IsNil(c) { // a typed nil too, e.g. a nil *redis.Client (audit 130)
		return goredisConn{}, errNilClient
	}
	enabled, known := true, true
	switch c := c.(type) {
	case *goredis.Client:
		enabled = c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		enabled = c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		enabled = c.Options().ContextTimeoutEnabled
	default:
		known = false
	}
	if known && !enabled {
		return goredisConn{}, fmt.Errorf("%w: the go-redis client must have ContextTimeoutEnabled: true in its options "+
			"(without it go-redis ignores context deadlines, so Timeout and the failure policies would not bound a call); got false", ErrInvalidConfig)
	}
	return goredisConn{c}, nil
}

// boxed is args as FCall's ...any.
func boxed(args []string) []any {
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	return a
}

// fcall uses the typed FCall (not Do): go-redis's AutoPipeliner batches
// typed commands only, and passes Do around its pipeline.
func (g goredisConn) fcall(ctx context.Context, fn string, keys, args []string) (string, error) {
	return g.c.FCall(ctx, fn, keys, boxed(args)...).Text()
}

func (g goredisConn) fcallStrings(ctx context.Context, fn string, keys, args []string) ([]string, error) {
	return g.c.FCall(ctx, fn, keys, boxed(args)...).StringSlice()
}

func (g goredisConn) concurrent() int {
	n := 1
	switch c := g.c.(type) {
	case *goredis.Client:
		n = c.Options().PoolSize
	case *goredis.ClusterClient:
		n = c.Options().PoolSize // per node
	case *goredis.Ring:
		n = c.Options().PoolSize // per shard
	}
	return max(n, 1)
}

// shardIterator is what go-redis's ClusterClient and Ring have.
type shardIterator interface {
	ForEachShard(ctx context.Context, fn func(ctx context.Context, client *goredis.Client) error) error
}

// errAutoPipelinerCluster refuses go-redis's AutoPipeliner over a Redis
// Cluster (audit 123): it hides the ClusterClient's nodes and sends the
// keyless FUNCTION LOAD and the start-up check's commands to one node.
var errAutoPipelinerCluster = fmt.Errorf("%w: go-redis's AutoPipeliner over a Redis Cluster hides the nodes that FUNCTION LOAD and Check must reach "+
	"(it sends those commands to one node, so the others never get the library): pass the ClusterClient itself to NewGoRedis, or use rueidis "+
	"(an AutoPipeliner is for a standalone server's *redis.Client)", ErrInvalidConfig)

func (g goredisConn) nodes(ctx context.Context) ([]node, error) {
	it, ok := g.c.(shardIterator)
	if ap, isAP := g.c.(*goredis.AutoPipeliner); isAP {
		// The base client is out of reach; a cluster says so itself. An
		// INFO that fails (RequiredACL has no +info: audit 126) tells
		// nothing, and the call goes on as before.
		if info, err := ap.Info(ctx, "cluster").Result(); err == nil {
			if v, _ := infoField(info, "cluster_enabled"); v == "1" {
				return nil, errAutoPipelinerCluster
			}
		}
	}
	if !ok {
		name := "server"
		if c, ok := g.c.(*goredis.Client); ok {
			name = c.Options().Addr
		}
		return []node{goredisNode{address: name, c: g.c}}, nil
	}
	var mu sync.Mutex
	var ns []node
	err := it.ForEachShard(ctx, func(_ context.Context, c *goredis.Client) error {
		mu.Lock()
		ns = append(ns, goredisNode{address: c.Options().Addr, c: c})
		mu.Unlock()
		return nil
	})
	sort.Slice(ns, func(i, j int) bool { return ns[i].addr() < ns[j].addr() })
	return ns, err
}

func (goredisConn) serverError(err error) (string, bool) {
	var re goredis.Error
	if errors.As(err, &re) && !errors.Is(err, goredis.Nil) {
		return re.Error(), true
	}
	return "", false
}

type goredisNode struct {
	address string
	c       goredis.Cmdable
}

func (n goredisNode) addr() string { return n.address }

func (n goredisNode) functionLoad(ctx context.Context, code string) error {
	return n.c.FunctionLoad(ctx, code).Err()
}

func (n goredisNode) configGet(ctx context.Context, param string) (string, error) {
	m, err := n.c.ConfigGet(ctx, param).Result()
	if err != nil {
		return "", err
	}
	v, ok := m[param]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter in the reply", param)
	}
	return v, nil
}

func (n goredisNode) info(ctx context.Context, section string) (string, error) {
	return n.c.Info(ctx, section).Result()
}

// infoField returns field's value from an INFO reply.
func infoField(info, field string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v, true
		}
	}
	return "", false
}
