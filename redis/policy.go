package redis

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrDegraded is matched (errors.Is) by the error a Limiter returns along
// with a decision it made without the server (the server failed, timed
// out or held foreign data); the error also wraps the cause.
var ErrDegraded = errors.New("redis: degraded: decision made without the server")

// Policy says what a Limiter decides when the server cannot answer.
type Policy uint8

const (
	// FailClosed denies (the zero value: a limiter that cannot count
	// does not admit).
	FailClosed Policy = iota
	// FailOpen admits.
	FailOpen
	// LocalFallback decides with a local lock-free limiter at Rate/N and
	// Burst/N (each rounded down, so that N of them never exceed Rate and
	// Burst), N = LimiterConfig.Instances: N instances that all fall
	// back admit at most the global rate between them while the fault
	// lasts. The fallback starts from its own state, not the server's
	// debts, and the server never learns what it admitted, so around a
	// fault a key can be admitted up to one Burst more than the global
	// bucket allows (the server's Burst before it, the fallbacks' N x
	// Burst/N during it). A request above Burst/N (but within Burst)
	// gets no decision from it, as under FailClosed.
	LocalFallback
)

// String names the policy.
func (p Policy) String() string {
	switch p {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case LocalFallback:
		return "LocalFallback"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Stats are a Limiter's counters since NewLimiter. Read with
// Limiter.Stats; each field is read atomically, not the set together.
type Stats struct {
	Decisions      int64 // AllowN calls that returned a decision
	ServerCalls    int64 // decisions sent to the server: one each, however many round trips it took (a library reload after "Function not found", TRYAGAIN retries)
	ServerErrors   int64 // of those, the ones the server did not answer: the fault policy decided (Timeouts included)
	Timeouts       int64 // failures by deadline (context.DeadlineExceeded, or a connection's i/o deadline: os.ErrDeadlineExceeded)
	CacheDenials   int64 // denials answered by the deny cache: round trips saved
	PolicyAdmits   int64 // admissions made by the fault policy (FailOpen, LocalFallback)
	PolicyDenials  int64 // denials made by the fault policy (FailClosed, LocalFallback)
	DegradedPeriod int64 // transitions from healthy to degraded
}

// counters is Stats in atomics.
type counters struct {
	decisions, serverCalls, serverErrors, timeouts, cacheDenials atomic.Int64
	policyAdmits, policyDenials, degradedPeriods                 atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Decisions: c.decisions.Load(), ServerCalls: c.serverCalls.Load(),
		ServerErrors: c.serverErrors.Load(), Timeouts: c.timeouts.Load(),
		CacheDenials: c.cacheDenials.Load(), PolicyAdmits: c.policyAdmits.Load(),
		PolicyDenials: c.policyDenials.Load(), DegradedPeriod: c.degradedPeriods.Load(),
	}
}
