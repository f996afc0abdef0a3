// Package httplimit is net/http middleware over a per-key limiter: a
// limit per client in constant memory, whatever the number of clients.
//
//	l := limit.MustNew(10, 20)                 // 10/s, bursts of 20, per client
//	http.ListenAndServe(addr, httplimit.Wrap(l, mux))
//
// # Limiters
//
// The middleware takes a Limiter, an interface of two methods
// (DecideContext and Policies) that *limit.Limiter and *limit.Multi (10/s
// and 1000/h at once, all or nothing) implement, and so does the Redis
// module's *redis.Limiter (one limit across the instances of a service).
// A Multi's windows need distinct names (limit.WithName): RateLimit-Policy
// lists them all, RateLimit names the one that binds. Per route, give each
// route its own Middleware: With copies one's options onto another
// limiter, and Handler wraps the route (mux.Handle(pattern,
// login.Handler(h)), chi's r.With(login.Handler)). For routers whose
// middleware is not an http.Handler wrapper (gin, echo's native form),
// Allow decides a request and answers it unless it should go on. The
// examples module of the repository (examples/) runs it under net/http,
// chi, echo and gin.
//
// # Hooks
//
// WithSkip (before the key: health checks) and WithExcludedKey (after
// it: an allowlist) let requests through untouched; WithDeniedHandler
// writes denials (the fields already set); WithErrorHandler answers what
// cannot be decided; WithLimiterError sees every error of the limiter;
// WithHook sees every decision.
//
// # Keys
//
// RemoteIP (the default) keys by the connection's address, IPv6 folded to
// its /64 (WithIPv6Prefix to change), IPv4 kept whole (WithIPv4Prefix).
// X-Forwarded-For is used only with WithTrustedProxies(n), n the exact
// number of proxies in front of the server, and then only the entry the
// outermost trusted proxy wrote (the n-th from the right: the address
// that proxy saw connect): it is never trusted by default.
// Header and Func key by a header or any function.
//
// A connection without an IP address (RemoteAddr "" or "@": a Unix-socket
// listener, as behind a local proxy) has no client to key by: RemoteIP
// returns an error matching ErrNoClientIP and the request is answered 500
// (a deployment error, not the client's), with no internal text; behind
// such a proxy, key by its X-Forwarded-For (WithTrustedProxies(1)).
//
// # Answers
//
// Every answer carries the fields of draft-ietf-httpapi-ratelimit-headers-10
// (the version followed, see Draft), as Structured Fields (RFC 9651)
// Lists of Items whose values are policy names (limit.WithName, an
// sf-string): RateLimit-Policy one per policy of the limiter, RateLimit
// one for the policy the Decision names:
//
//	RateLimit-Policy: "default";q=20;w=2
//	RateLimit: "default";r=13;t=1
//
// For a token bucket, q (quota) is the burst, w (window, seconds) the
// time to refill it from empty as the limiter holds it (ceil(burst/rate)
// for an exact policy, a little more for an inexact one of package
// limit or of the redis module's Limiter; ceil(burst/rate) for other
// limiters), at least 1 (a policy of burst 0 announces w=1); r
// (remaining) is the Decision's Remaining (q and r above the 15 digits
// a Structured Field Integer holds are announced as 999999999999999) and t, the seconds until more quota is available,
// its NextAfter (the next whole token) rounded up, left out when the
// bucket is full. A Multi's denial names the window that denies longest;
// its Decision's Remaining and NextAfter are the least of all windows,
// another window's next token, so there r is that least (at most the
// named window's own) and t the RetryAfter (by which the named window
// has more quota): never a promise earlier than the named window keeps.
// The draft's semantics hold: r is a hint, and on a
// denial Retry-After takes precedence and is never earlier than t. A
// denial is 429 with Retry-After in whole seconds, RetryAfter rounded up
// (never early for the key's own debt), text/plain or, with
// WithProblemJSON, an RFC 9457 problem+json body of the draft's
// quota-exceeded problem type. A request whose cost exceeds the burst can
// never be admitted: 429 without Retry-After, and the body says not to
// retry. WithLegacyHeaders adds X-RateLimit-Limit/Remaining/Reset;
// WithHook sees every decision.
//
// Stacked middlewares (a global limit around a per-route one) each add
// their items to the fields the outer ones set, so the answer lists
// every policy that decided it; an item naming one of a middleware's own
// policies is replaced, not repeated (give stacked limiters distinct
// names: an inner policy of the same name replaces the outer one's); a
// member already there that is not a Structured Field Item (RFC 9651: a
// recipient would discard the whole field for it) is dropped.
// The legacy fields keep the least Remaining of the middlewares that set
// them. A denial's Retry-After is never earlier than the t of any listed
// item with no quota left (r=0), nor than a Retry-After already set: a
// one-token retry at that second is not denied again by a policy the
// answer lists as empty. A costlier one (WithCost) may be: t is that
// policy's next whole token, and only its own middleware knows how many
// it needs (cost 3 on an outer 1/s policy listed as r=0;t=1 fits 3 s
// later, not at Retry-After: 1).
// Stack separate limiters, not a Limiter around one of its own Tiers: a
// Tier shares its Limiter's debt (limit.Tier), so the two charge one
// debt twice, and the outer charge of a retry lands before the inner
// policy decides. The Retry-After promise does not hold for such a
// stack: a Tier of 1/s, burst 1, inside its 10/s Limiter denies every
// request, its retries included. A Limiter's Tiers are for sibling
// routes (With), where each request charges the debt once.
//
// A request whose key cannot be extracted, or whose cost is invalid, goes
// to the error handler (WithErrorHandler) with a typed error (ErrNoClientIP,
// ErrForwardedFor, ErrNoHeader, ErrBadCost), and so does one the limiter
// could not decide (ErrLimiter, wrapping the limiter's error: a remote
// store down with no fallback); the default answers 400 for the client's
// own faults, 500 for the server's and 503 for the limiter's, with the
// status text only: no error text ever reaches a response. A limiter that
// errs but still decides (the Redis module's FailOpen and LocalFallback
// policies) is followed. New's errors are *sketch.ConfigError values (a
// nil limiter or Option included).
package httplimit
