package httplimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc extracts the rate-limiting key of a request. An error sends the
// request to the error handler (default: 400, or 500 for ErrNoClientIP;
// see WithErrorHandler) and consumes no tokens.
type KeyFunc func(r *http.Request) (string, error)

// The errors of the KeyFuncs of this package, matched with errors.Is (the
// errors themselves carry the detail, for logs; they are never written
// to a response by the default error handler).
var (
	// ErrNoClientIP: RemoteAddr holds no IP address ("", "@" or a path:
	// a Unix-socket listener). A server error: the default handler
	// answers 500.
	ErrNoClientIP = errors.New("httplimit: RemoteAddr holds no client IP address")
	// ErrForwardedFor: X-Forwarded-For has fewer entries than the trusted
	// proxies, or the trusted entry is not an address. 400.
	ErrForwardedFor = errors.New("httplimit: no usable X-Forwarded-For entry")
	// ErrNoHeader: the request lacks the header Header keys by. 400.
	ErrNoHeader = errors.New("httplimit: request lacks the key header")
	// ErrNilRequest: a KeyFunc was called with a nil request. 500.
	ErrNilRequest = errors.New("httplimit: nil request")
	// ErrBadCost: WithCost's function returned n < 1. 500.
	ErrBadCost = errors.New("httplimit: cost must be >= 1")
)

// IPOption configures RemoteIP.
type IPOption func(*ipConfig)

type ipConfig struct {
	v4Bits, v6Bits int
	trusted        int // trusted proxies in front; 0: X-Forwarded-For ignored
}

// WithIPv6Prefix folds IPv6 addresses to their first bits bits (default
// 64: one customer site usually holds a whole /64, so per-address keys
// would let it rotate through 2^64 of them). 128 keeps whole addresses.
func WithIPv6Prefix(bits int) IPOption { return func(c *ipConfig) { c.v6Bits = bits } }

// WithIPv4Prefix folds IPv4 addresses to their first bits bits (default
// 32: whole addresses).
func WithIPv4Prefix(bits int) IPOption { return func(c *ipConfig) { c.v4Bits = bits } }

// WithTrustedProxies takes the client address from X-Forwarded-For,
// trusting exactly n proxies in front of the server: the client is the
// n-th entry from the right (each trusted proxy appended the address it
// received the connection from; anything further left was written by
// the client and is ignored). A request whose X-Forwarded-For has fewer
// than n entries is refused with an error matching ErrForwardedFor. n = 0 (the default) ignores
// X-Forwarded-For entirely: it is never trusted by default.
func WithTrustedProxies(n int) IPOption { return func(c *ipConfig) { c.trusted = n } }

// RemoteIP returns a KeyFunc keying requests by the client's IP address
// (http.Request.RemoteAddr, or X-Forwarded-For with WithTrustedProxies),
// folded to a prefix: IPv6 to /64 and IPv4 to /32 by default. IPv4-mapped
// IPv6 addresses count as IPv4; other IPv6 forms that embed an IPv4
// address do not: behind a NAT64 gateway (64:ff9b::/96) every IPv4
// client shares the gateway's /64 key (WithIPv6Prefix(128) keeps the
// embedded address, or key with Func). The key is the prefix in CIDR form
// ("2001:db8:1:2::/64", "203.0.113.7/32"). It panics, with a message
// that starts "httplimit:", on a prefix length out of range or a negative
// proxy count.
func RemoteIP(opts ...IPOption) KeyFunc {
	c := ipConfig{v4Bits: 32, v6Bits: 64}
	for _, o := range opts {
		o(&c)
	}
	if c.v4Bits < 0 || c.v4Bits > 32 {
		panic(fmt.Sprintf("httplimit: IPv4 prefix must be in 0..32; got %d", c.v4Bits))
	}
	if c.v6Bits < 0 || c.v6Bits > 128 {
		panic(fmt.Sprintf("httplimit: IPv6 prefix must be in 0..128; got %d", c.v6Bits))
	}
	if c.trusted < 0 {
		panic(fmt.Sprintf("httplimit: trusted proxies must be >= 0; got %d", c.trusted))
	}
	return func(r *http.Request) (string, error) {
		if r == nil {
			return "", ErrNilRequest
		}
		var a netip.Addr
		var err error
		if c.trusted > 0 {
			a, err = forwardedFor(r.Header.Values("X-Forwarded-For"), c.trusted)
		} else {
			a, err = remoteAddr(r.RemoteAddr)
		}
		if err != nil {
			return "", err
		}
		return fold(a, c.v4Bits, c.v6Bits), nil
	}
}

// remoteAddr parses RemoteAddr ("host:port", or a bare address as some
// servers and tests set it). Anything else (net/http sets "" or "@" for a
// Unix socket's unnamed peer) is ErrNoClientIP.
func remoteAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("%w (empty)", ErrNoClientIP)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), nil
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w (%q)", ErrNoClientIP, s)
	}
	return a, nil
}

// forwardedFor returns the n-th address from the right of the
// comma-separated X-Forwarded-For lines (in order), n >= 1. It scans from
// the right and allocates nothing on success, whatever the header's size
// (splitting every line allocated about 32 bytes an entry: 33.5 MB for a
// 1 MiB header of commas, audit 52).
func forwardedFor(lines []string, n int) (netip.Addr, error) {
	left := n
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		for {
			j := strings.LastIndexByte(l, ',')
			if left--; left == 0 {
				return forwardedEntry(strings.TrimSpace(l[j+1:]))
			}
			if j < 0 {
				break
			}
			l = l[:j]
		}
	}
	entries := 0
	for _, l := range lines {
		entries += strings.Count(l, ",") + 1
	}
	return netip.Addr{}, fmt.Errorf("%w: %d entries, fewer than the %d trusted proxies", ErrForwardedFor, entries, n)
}

// forwardedEntry parses one X-Forwarded-For entry: an address, or an
// address with a port (some proxies append host:port).
func forwardedEntry(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(s); err2 == nil {
			return ap.Addr(), nil
		}
		return netip.Addr{}, fmt.Errorf("%w: cannot parse the entry %q", ErrForwardedFor, s)
	}
	return a, nil
}

// fold returns a's prefix of v4 or v6 bits in CIDR form, without zone.
func fold(a netip.Addr, v4, v6 int) string {
	a = a.Unmap().WithZone("")
	bits := v6
	if a.Is4() {
		bits = v4
	}
	p, _ := a.Prefix(bits) // bits is in range for a's family
	return p.String()
}

// Header returns a KeyFunc keying requests by the value of header name
// (an API key, a user id set by an authenticating proxy). A request
// without it gets an error. Prefer a key the server verified: a client
// can put anything in a header.
func Header(name string) KeyFunc {
	if name == "" {
		panic("httplimit: Header needs a header name")
	}
	return func(r *http.Request) (string, error) {
		if r == nil {
			return "", ErrNilRequest
		}
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w %s", ErrNoHeader, name)
		}
		return v, nil
	}
}

// Func returns a KeyFunc from a function that cannot fail.
func Func(f func(r *http.Request) string) KeyFunc {
	if f == nil {
		panic("httplimit: Func needs a function")
	}
	return func(r *http.Request) (string, error) {
		if r == nil {
			return "", ErrNilRequest
		}
		return f(r), nil
	}
}
