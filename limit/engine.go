package limit

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
)

// Engine names the structure that holds the keys' debts (WithEngine).
type Engine uint8

const (
	// Auto (the default) picks Buckets wherever it is exact, CountMin
	// otherwise (see the package documentation, "Engines").
	Auto Engine = iota
	// Buckets is the bucketed table (internal/bucket): a key at its
	// limit takes one 32-bit entry, so the default memory holds a
	// million keys at full debt while denying 0.03% of fresh keys
	// (docs/capacity.md). It is exact (Exact) where it holds a limiter:
	// MaxDebt must drain within 61,438 ticks (61.4 s where a tick is a
	// millisecond) and a token be a whole number of ticks of at most a
	// millisecond, at most 16,384 to the millisecond,
	// MaxDebt's ticks and a millisecond's together at most 65,534, and
	// MaxDebt and RejectCost whole numbers of ticks (see "Engines"); New
	// refuses WithEngine(Buckets) otherwise.
	Buckets
	// CountMin is the rotator of count-min sketches: any rate, any
	// MaxDebt, re-rolled seeds every Period; about 10 cells per key at its
	// limit for 1% of fresh keys denied.
	CountMin
)

func (e Engine) String() string {
	switch e {
	case Auto:
		return "auto"
	case Buckets:
		return "buckets"
	case CountMin:
		return "count-min"
	}
	return fmt.Sprintf("Engine(%d)", uint8(e))
}

// WithEngine chooses the engine (default Auto). WithSize,
// WithGenerations, WithPeriod and WithConservativeUpdate(true) configure
// the count-min: with Auto they select it, with Buckets they are an
// error.
func WithEngine(e Engine) Option { return func(o *options) { o.engine = e } }

// WithCapacity sizes the engine for keys keys at their limit at once
// with at most a share deny of fresh keys (keys never seen) denied
// because of them (the count-min's, an expected share: see Suggest): Suggest's Lines for Buckets, its Levels x Cells for
// CountMin (for the limiter's Generations). Under Auto it selects
// CountMin where only the count-min holds them within MaxBytes
// (Suggest's Buckets is zero, or above MaxBytes where the count-min's
// cells are not); where both do, the engine is Auto's usual choice, though below
// a denial rate of about 7e-6 (for 1,000 keys or more; lower for fewer)
// the count-min is the smaller (Suggest says both sizes;
// WithEngine(CountMin) takes it). It replaces the default
// memory; it cannot be combined with WithSize. keys must be >= 1 and deny
// in (0, 1); the memory is bounded by WithMaxBytes like any size.
func WithCapacity(keys int, deny float64) Option {
	return func(o *options) { o.capKeys, o.capDeny, o.capSet = keys, deny, true }
}

// defaultBucketBytes is the Buckets engine's default memory: the cells of
// the count-min's default, two generations of 4 x 100,000 cells (6.10
// MiB), so that the two defaults compare on equal memory.
var defaultBucketBytes = int(2 * core.CellBytes(core.DefaultLevels, core.DefaultCellsPerLevel))

// bucketPlan is how the limiter would count debt in the Buckets engine:
// unit ticks per token and drain ticks per ms, both integers, for a rate
// of 1000 x drain / unit per second (<= the limit); ok false when the
// engine cannot hold the law with ticks of at most a millisecond.
type bucketPlan struct {
	unit, drain float64
	exact       bool // 1000 x drain / unit is the limit's exact rational value
	ok          bool
}

// planBuckets quantizes the limiter's law for the Buckets engine (the
// engine's own choice, bucket.QuantumOf): ticks of at most a
// millisecond, MaxDebt within the 16-bit span. The plan is exact when
// the rate is, and MaxDebt and RejectCost are whole numbers of ticks
// (as the limiter holds them: the float64 nearest to the product):
// the engine clamps a debt at MaxDebt's ticks rounded down, and stores
// a RejectCost rounded up (audit 90: WithMaxDebt(40.0001) at 10/s
// clamped at 40 tokens, a key at MaxDebt 1 ms early).
func planBuckets(rate, maxDebt, rejectCost float64) bucketPlan {
	q, err := bucket.QuantumOf(bucket.Linear(rate, maxDebt))
	if err != nil || q.PerMs == 0 {
		return bucketPlan{}
	}
	p := bucketPlan{unit: q.PerUnit, drain: float64(q.PerMs), ok: true}
	if num, den, ok := units.Fraction(rate); ok {
		// rate = num/den exactly iff unit x num == 1000 x den x drain.
		a := new(big.Int).Mul(big.NewInt(int64(p.unit)), num)
		b := new(big.Int).Mul(new(big.Int).Mul(big.NewInt(1000), den), big.NewInt(int64(q.PerMs)))
		p.exact = a.Cmp(b) == 0 && wholeProduct(maxDebt, p.unit) && wholeProduct(rejectCost, p.unit)
	}
	return p
}

// heldUnits is x tokens at unit units a token as the limiter holds a
// MaxDebt or a RejectCost: the float64 product, and the whole number
// within 4 ulps of it where there is one, so that a decimal means what
// it says (WithMaxDebt: 40.0001 x 10000 is 400001.00000000006 in
// float64, held as 400001; audit 91).
func heldUnits(x, unit float64) float64 {
	p := x * unit
	if math.IsInf(p, 0) || math.IsNaN(p) || p < 0 {
		return p
	}
	return common.SnapWhole(p)
}

// wholeProduct reports whether a x b, held as heldUnits holds it, is a
// whole number.
func wholeProduct(a, b float64) bool { return onGrid(heldUnits(a, b), 0) }

// bucketsMaxDebt returns the least MaxDebt at or above need that the
// Buckets engine holds exactly for rate and rejectCost (a whole number
// of the ticks that MaxDebt itself gives: the ticks depend on it, so a
// few rounds), and false when there is none near (the rate or the
// RejectCost is off every grid, or the span is too long).
func bucketsMaxDebt(rate, need, rejectCost float64) (float64, bool) {
	for range 8 {
		p := planBuckets(rate, need, rejectCost)
		if !p.ok {
			return need, false
		}
		if p.exact {
			return need, true
		}
		if !wholeProduct(rejectCost, p.unit) {
			return need, false
		}
		next, found := need, false
		for k := math.Ceil(need * p.unit); !found && k <= math.Ceil(need*p.unit)+4; k++ {
			c := k / p.unit
			for _, c := range []float64{c, math.Nextafter(c, math.Inf(1)), math.Nextafter(c, math.Inf(-1))} {
				if c >= need && c*p.unit == k {
					next, found = c, true
					break
				}
			}
		}
		if !found || next == need {
			return need, false
		}
		need = next
	}
	return need, false
}

// chooseEngine returns the engine for the limiter's law and options, or
// the reason an explicit choice cannot be honored.
func chooseEngine(o *options, rate, maxDebt float64, p bucketPlan) (Engine, error) {
	cmOnly := o.countMinOnly()
	// The bucket holds a limiter only where it is exact, so that every
	// guarantee of the package holds on either engine.
	fits := p.ok && p.exact
	switch o.engine {
	case Auto:
		if !cmOnly && fits {
			return Buckets, nil
		}
		return CountMin, nil
	case Buckets:
		// checkRateless has refused count-min options with Buckets.
		if !fits {
			return 0, bad("Engine", o.engine, "the Buckets engine is exact only when MaxDebt drains within %.3f s in whole ticks of at most 1 ms (at most 16384 to the ms, and at most 65534 for MaxDebt and one ms together), a token, MaxDebt and RejectCost being whole numbers of them (MaxDebt/limit = %v / %v, RejectCost %v); use Auto or CountMin", float64(bucketMaxTicks)/1000, maxDebt, rate, o.rejectCost)
		}
		return Buckets, nil
	case CountMin:
		return CountMin, nil
	}
	return 0, bad("Engine", o.engine, "Engine must be Auto, Buckets or CountMin; got %v", o.engine)
}

// countMinOnly reports whether o holds an option only the count-min
// takes, or a capacity only the count-min holds (capCountMin): Auto then
// picks it whatever MaxDebt.
func (o *options) countMinOnly() bool {
	return o.sizeSet || o.genSet || o.periodSet || o.cu || o.capCountMin
}

// capacityOnlyCountMin reports whether, for WithCapacity under Auto,
// only the count-min of o's generations holds the keys within MaxBytes:
// the Buckets engine would need more than 2^32 lines, or more than
// MaxBytes where the count-min's cells fit (a denial rate far below
// 7e-4, where its 16-bit fingerprints set its size: docs/capacity.md,
// "Sizing"; audit 121).
func (o *options) capacityOnlyCountMin() bool {
	if g, err := o.capBuckets(); err == nil {
		if _, _, ok := o.bucketsFit(g.Lines); ok {
			return false
		}
	}
	c, err := bucket.SuggestCountMin(o.capKeys, o.capDeny, int(o.generations))
	return err == nil && int64(c.Generations)*core.CellBytes(c.Levels, c.Cells) <= o.maxBytes()
}

// maxBytes is the memory bound of o: MaxBytes, or its default when 0.
func (o *options) maxBytes() int64 {
	if o.MaxBytes == 0 {
		return core.DefaultMaxBytes
	}
	return o.MaxBytes
}

// bucketsFit reports whether a Buckets engine of lines lines fits
// within o's memory bound: the bytes it needs (its lines and one for the
// header) and the bound.
func (o *options) bucketsFit(lines int) (n, maxBytes int64, ok bool) {
	n, maxBytes = int64(lines+1)*bucket.LineBytes, o.maxBytes()
	return n, maxBytes, n <= maxBytes
}

// capBuckets is bucket.Suggest for WithCapacity's keys and deny,
// computed once for New (Auto's choice and then the engine's size).
func (o *options) capBuckets() (bucket.Geometry, error) {
	if o.capGeom != nil {
		return *o.capGeom, nil
	}
	g, err := bucket.Suggest(o.capKeys, o.capDeny)
	if err == nil {
		o.capGeom = &g
	}
	return g, err
}

// bucketMaxTicks is the most ticks a debt can span in the Buckets engine
// (its 16-bit stamps less the sweep's margin): at 1 ms a tick, MaxDebt
// must drain within this many ms.
const bucketMaxTicks = 61438

// newBuckets builds the Buckets engine for l (unit and drain set from the
// plan), sized by o.
func (l *Limiter) newBuckets(o *options) error {
	lines := bucket.LinesFor(defaultBucketBytes)
	if o.capSet {
		g, err := o.capBuckets()
		if err != nil {
			return bad("Capacity", o.capKeys, "%v", err)
		}
		lines = g.Lines
	}
	if n, maxBytes, ok := o.bucketsFit(lines); !ok {
		return bad("Size", n, "%d lines need %d bytes, above MaxBytes %d; raise WithMaxBytes or lower WithCapacity", lines, n, maxBytes)
	}
	// The engine counts in the limiter's units: a load of one unit is a
	// whole number of its ticks, and it drains 1000 x drain units per
	// second, whole ticks per ms, so every debt it reads at a millisecond
	// is an exact integer number of units.
	e, err := bucket.New(bucket.Config{
		Lines:   lines,
		Law:     bucket.Linear(1000*l.drain, l.maxDebtU),
		Hasher:  conv.Hasher(o.Hasher),
		Seed:    o.Seed,
		SeedSet: true,
		Clock:   l.tb,
	})
	if err != nil {
		return core.Prefixed("limit", err)
	}
	if q := e.Quantum(); q.PerMs == 0 || q.Rate != 1000*l.drain || float64(q.PerMs) != l.drain*q.PerUnit {
		// Cannot happen for the plans planBuckets makes.
		return bad("Engine", Buckets, "the Buckets engine did not take the limiter's units (rate %v, unit %v, drain %v)", l.rate, l.unit, l.drain)
	}
	l.b = e
	return nil
}

// receipt is what an admitted reservation took, in either engine.
type receipt struct {
	cm core.Reservation
	b  bucket.Receipt
}

// The engine seam: every read and write of a key's debt goes through
// these, in units (see internal/units), at t (as the full forms take it).

func (l *Limiter) queryAt(t time.Time, key string) float64 {
	if l.b != nil {
		return l.b.QueryAt(t, key)
	}
	return l.held(l.r.QueryStringAt(t, key))
}

func (l *Limiter) addAt(t time.Time, key string, u float64) float64 {
	if l.b != nil {
		return l.b.UpdateAndQueryAt(t, key, u)
	}
	return l.held(l.r.UpdateAndQueryStringAt(t, key, u))
}

// after returns the debt a key read at debt would read after a write of
// u units, as the engine stores it: the count-min rounds the sum up to a
// float32 (and reads a clamped cell as held does), so that PeekN says
// what DecideN would (audit 103: 100 ms early at Every(24h) after a
// take of 20, where the float64 sum fell between two float32s).
func (l *Limiter) after(debt, u float64) float64 {
	if l.b != nil {
		return debt + u
	}
	return l.held(float64(atom.RoundUp(atom.SumUp(debt, u)))) // the exact sum, rounded up
}

// held returns a count-min read of a key's debt as the cells may hold
// it: a read at MaxDebt, when no float32 holds MaxDebt in units, may be
// a cell at the float32 above it (the sketch stores its clamp rounded
// up and caps every read at Hi), which drains from there. Durations
// computed from the capped read were early by the difference's drain
// (audit 66: 40 ms at 0.944/s with MaxDebt 958687; 32.8 s at 5.6e-4/s).
// Read as the clamp, they are late by at most that.
func (l *Limiter) held(debt float64) float64 {
	if debt >= l.maxDebtU {
		return l.heldU
	}
	return debt
}

// tryAndQueryAt is a strict decision returning the debt right after it:
// for an admission what the take itself left (nU and every earlier
// take, none of a later one), for a denial the debt it read.
func (l *Limiter) tryAndQueryAt(t time.Time, key string, nU, limU float64) (bool, float64) {
	if l.b != nil {
		return l.b.TryUpdateAndQueryAt(t, key, nU, limU)
	}
	ok, debt := l.r.TryUpdateAndQueryStringAt(t, key, nU, limU)
	return ok, l.held(debt)
}

func (l *Limiter) reserveAt(t time.Time, key string, nU, capU float64) (receipt, bool) {
	var rc receipt
	var ok bool
	if l.b != nil {
		rc.b, ok = l.b.TryReserveAt(t, key, nU, capU)
	} else {
		rc.cm, ok = l.r.TryReserveStringAt(t, key, nU, capU)
	}
	return rc, ok
}

// reserved returns the key's debt right after the admitted reservation
// rc took, its own included, and the time it holds at: the engine's
// reading for the take itself, so racing reservations of the key made
// after it are not in it.
func (l *Limiter) reserved(rc *receipt) (time.Time, float64) {
	var ms int64
	var debt float64
	if l.b != nil {
		ms, debt = l.b.Reserved(&rc.b)
	} else {
		ms, debt = l.r.Reserved(&rc.cm)
		debt = l.held(debt)
	}
	return l.tb.Time(ms), debt
}

func (l *Limiter) refund(rc *receipt) {
	if l.b != nil {
		l.b.Refund(&rc.b)
		return
	}
	l.r.Refund(&rc.cm)
}

// Engine returns the engine the limiter runs on: Buckets or CountMin
// (Auto resolved), or Auto for Inf and the zero Limiter, which keep no
// state.
func (l *Limiter) Engine() Engine {
	switch {
	case l.b != nil:
		return Buckets
	case l.r != nil:
		return CountMin
	}
	return Auto
}
