package httplimit

import (
	"encoding"
	"net/http"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// README.md and docs/snapshots.md:8-26: the names they give, with the
// stated signatures (compile-time).
var (
	_ Limiter                                                             = (*limit.Limiter)(nil)
	_ Limiter                                                             = (*limit.Multi)(nil)
	_ Limiter                                                             = (*limit.Tier)(nil)
	_ encoding.TextUnmarshaler                                            = (*limit.Limit)(nil)
	_ encoding.TextMarshaler                                              = limit.Limit(1)
	_ func(string) (limit.Limit, error)                                   = limit.ParseLimit
	_ func(*limit.Limiter, string, limit.Limit, int) (*limit.Tier, error) = (*limit.Limiter).Tier
	_ func(*limit.Limiter, limit.Limit) error                             = (*limit.Limiter).SetLimit
	_ func(*limit.Limiter, int) error                                     = (*limit.Limiter).SetBurst
	_ func(int, float64) limit.Option                                     = limit.WithCapacity
	_ float64                                                             = limit.Stats{}.Saturation

	_ snapshot.Source      = (*limit.Limiter)(nil)
	_ snapshot.Destination = (*limit.Limiter)(nil)
	_ snapshot.Source      = (*meter.Rate)(nil)
	_ snapshot.Destination = (*meter.Rate)(nil)
	_ snapshot.Source      = (*meter.Novelty)(nil)
	_ snapshot.Destination = (*meter.Novelty)(nil)
	_ snapshot.Source      = (*sketch.Sketch)(nil)

	_ func(string, time.Duration, snapshot.Source, ...snapshot.Option) (*snapshot.Saver, error) = snapshot.NewSaver
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).Save
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).Close
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).LastError
	_ func(*snapshot.Saver) uint64                                                              = (*snapshot.Saver).Saves
	_ func(func(error)) snapshot.Option                                                         = snapshot.OnError
	_ func(func(error)) snapshot.Option                                                         = snapshot.OnSave
	_ func(string, snapshot.Source) error                                                       = snapshot.WriteFile
	_ func(string, snapshot.Destination) error                                                  = snapshot.Load
	_ func(*sketch.Sketch, *sketch.Sketch, ...time.Duration) error                              = (*sketch.Sketch).Merge
	_ func(*sketch.Sketch) ([]byte, error)                                                      = (*sketch.Sketch).MarshalBinary
	_ func(*sketch.Sketch, []byte) error                                                        = (*sketch.Sketch).UnmarshalBinary

	// httplimit/doc.go and README.md:134: hooks and keys.
	_ func(bool) Option                                                     = WithProblemJSON
	_ func(func(*http.Request) bool) Option                                 = WithSkip
	_ func(func(string) bool) Option                                        = WithExcludedKey
	_ func(func(http.ResponseWriter, *http.Request, limit.Decision)) Option = WithDeniedHandler
	_ func(func(http.ResponseWriter, *http.Request, error)) Option          = WithErrorHandler
	_ func(Limiter, http.Handler, ...Option) http.Handler                   = Wrap
	_ func(*Middleware, Limiter, ...Option) (*Middleware, error)            = (*Middleware).With
	_ func(int) IPOption                                                    = WithTrustedProxies
	_                                                                       = []error{ErrNoClientIP, ErrForwardedFor, ErrNoHeader, ErrBadCost, ErrLimiter}
	_                                                                       = WithLimiterError
	_                                                                       = WithLegacyHeaders
	_                                                                       = Header
	_                                                                       = Func

	// README.md:112: limittest, a fake clock that can wait.
	_ limit.Clock = limittest.NewFakeClock()
)
