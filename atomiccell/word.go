package atomiccell

import "math"

// Word is a packed cell value: float32 score bits in the high half, uint32
// stamp in the low half. The zero Word is score +0 at stamp 0.
type Word uint64

// Pack builds a Word from a score and a stamp. score must not be NaN or Inf
// (use RoundUp to narrow).
func Pack(score float32, stamp uint32) Word {
	return Word(uint64(math.Float32bits(score))<<32 | uint64(stamp))
}

// Score returns the stored float32 score.
func (w Word) Score() float32 { return math.Float32frombits(uint32(w >> 32)) }

// Stamp returns the stored age stamp (ms relative to the owner's epoch,
// modulo 2^32).
func (w Word) Stamp() uint32 { return uint32(w) }

// Elapsed returns the milliseconds from stamp to now, computed modulo 2^32
// as a signed difference; a difference <= 0 (backwards clock, or an idle
// time past the 2^31 ms horizon) is 0.
func Elapsed(stamp, now uint32) int64 {
	d := int32(now - stamp)
	if d <= 0 {
		return 0
	}
	return int64(d)
}

// Newer returns the later of stamp and now in modular order: now if it is
// ahead of stamp, else stamp. It keeps stamps from moving backwards.
func Newer(stamp, now uint32) uint32 {
	if int32(now-stamp) > 0 {
		return now
	}
	return stamp
}

// RoundUp narrows x to float32, rounding toward +Inf, so the result is
// never below x. Values beyond the float32 range saturate at ±MaxFloat32
// (+Inf and -Inf included), so the result is always finite. NaN is a
// caller's error and is returned as NaN; the sketch rejects NaN before it
// reaches a cell.
func RoundUp(x float64) float32 {
	f := float32(x) // round to nearest even; ±Inf beyond the range
	if float64(f) < x {
		// Step one float32 toward +Inf by its bit pattern: up in
		// magnitude for positives, down for negatives, and from ±0 to
		// the smallest positive subnormal. Cheaper than Nextafter32.
		b := math.Float32bits(f)
		switch {
		case b&0x7fff_ffff == 0:
			b = 1
		case b>>31 == 0:
			b++ // may reach +Inf from MaxFloat32; saturated below
		default:
			b-- // -Inf steps to -MaxFloat32
		}
		f = math.Float32frombits(b)
	}
	if f > math.MaxFloat32 {
		return math.MaxFloat32
	}
	if f < -math.MaxFloat32 {
		return -math.MaxFloat32
	}
	return f
}
