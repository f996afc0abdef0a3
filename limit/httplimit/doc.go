// Package httplimit is net/http middleware over limit.Limiter: a limit per
// client in constant memory, whatever the number of clients.
//
//	l := limit.MustNew(10, 20)                 // 10/s, bursts of 20, per client
//	http.ListenAndServe(addr, httplimit.Wrap(l, mux))
//
// # Keys
//
// RemoteIP (the default) keys by the connection's address, IPv6 folded to
// its /64 (WithIPv6Prefix to change), IPv4 kept whole (WithIPv4Prefix).
// X-Forwarded-For is used only with WithTrustedProxies(n), n the exact
// number of proxies in front of the server, and then only the entry the
// nearest trusted proxy vouches for: it is never trusted by default.
// Header and Func key by a header or any function.
//
// # Answers
//
// Every answer carries the fields of draft-ietf-httpapi-ratelimit-headers-09
// (the version followed, see Draft), as Structured Fields (RFC 9651)
// Lists of one Item whose value is the policy name (limit.WithName, an
// sf-string):
//
//	RateLimit-Policy: "default";q=20;w=2
//	RateLimit: "default";r=13;t=1
//
// For a token bucket, q (quota) is the burst, w (window, seconds) the
// time to refill it from empty, ceil(burst/rate); r (remaining) is the
// Decision's Remaining and t (seconds until the quota resets) its
// ResetAfter rounded up. The draft's semantics hold: r is a hint, and on
// a denial Retry-After takes precedence. A denial is 429 with
// Retry-After in whole seconds, RetryAfter rounded up (never early for
// the key's own debt), text/plain or, with WithProblemJSON, an RFC 9457
// problem+json body. A request whose cost exceeds the burst can never be
// admitted: 429 without Retry-After, and the body says not to retry.
// WithLegacyHeaders adds X-RateLimit-Limit/Remaining/Reset; WithHook
// sees every decision.
package httplimit
