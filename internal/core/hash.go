package core

import (
	"crypto/rand"
	"encoding/binary"
	"unsafe"

	"github.com/dchest/siphash"
	"github.com/zeebo/xxh3"
)

// Hasher maps a key to 64 bits. Implementations must be safe for
// concurrent use and must not retain or modify key.
type Hasher interface {
	Sum64(key []byte) uint64
	Sum64String(key string) uint64
}

// HasherFactory builds a Hasher from Config.Seed. Sketches with different
// seeds (the rotator's generations) use independent hash functions.
type HasherFactory func(seed uint64) Hasher

// XXH3 returns the default hasher factory: XXH3-64 (github.com/zeebo/xxh3)
// seeded with Config.Seed. Fast and well distributed, but not a keyed PRF:
// an attacker who knows the seed (or can probe the sketch) can craft
// colliding keys. Use SipHash for untrusted keys.
func XXH3() HasherFactory { return func(seed uint64) Hasher { return xxh3Hasher(seed) } }

type xxh3Hasher uint64

func (h xxh3Hasher) Sum64(key []byte) uint64 { return xxh3.HashSeed(key, uint64(h)) }
func (h xxh3Hasher) Sum64String(key string) uint64 {
	return xxh3.HashStringSeed(key, uint64(h))
}

// sum64 is s.hasher.Sum64(key), with the default hasher called directly
// rather than through the interface (a dispatch and a wrapper fewer on
// every operation). It inlines.
func (s *Sketch) sum64(key []byte) uint64 {
	if s.xx {
		return xxh3.HashSeed(key, s.xxSeed)
	}
	return s.otherSum64(key)
}

//go:noinline
func (s *Sketch) otherSum64(key []byte) uint64 {
	if s.hasher == nil {
		ZeroSketch() // every keyed operation hashes first: a zero Sketch (xx false) lands here
	}
	return s.hasher.Sum64(key)
}

// sum64String is sum64 for a string key.
func (s *Sketch) sum64String(key string) uint64 {
	if s.xx {
		return xxh3.HashStringSeed(key, s.xxSeed)
	}
	return s.otherSum64String(key)
}

//go:noinline
func (s *Sketch) otherSum64String(key string) uint64 {
	if s.hasher == nil {
		ZeroSketch()
	}
	return s.hasher.Sum64String(key)
}

// RandomSeed returns 8 bytes from crypto/rand as a Config.Seed: the
// secret seed SipHash needs when keys come from untrusted clients (the
// default of packages limit and meter).
func RandomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return binary.LittleEndian.Uint64(b[:])
}

// SipHash returns the keyed-PRF hasher factory: SipHash-2-4
// (github.com/dchest/siphash) under a 128-bit key expanded from
// Config.Seed with two rounds of splitmix64 (as grudge does). Choose it
// when keys come from untrusted clients and the seed is secret.
func SipHash() HasherFactory {
	return func(seed uint64) Hasher {
		st := seed
		k0 := SplitMix64(&st)
		k1 := SplitMix64(&st)
		return sipHasher{k0, k1}
	}
}

type sipHasher struct{ k0, k1 uint64 }

func (h sipHasher) Sum64(key []byte) uint64 { return siphash.Hash(h.k0, h.k1, key) }
func (h sipHasher) Sum64String(key string) uint64 {
	// The hash only reads key, so viewing the string's bytes is safe and
	// keeps the string twins allocation-free.
	return siphash.Hash(h.k0, h.k1, unsafe.Slice(unsafe.StringData(key), len(key)))
}

// SplitMix64 advances *state and returns the next output of Vigna's
// SplitMix64 generator (Steele, Lea, Flood, "Fast splittable pseudorandom
// number generators", OOPSLA 2014). It expands the SipHash key from
// Config.Seed and derives a rotator's generation seeds: the one copy in
// the module.
func SplitMix64(state *uint64) uint64 {
	*state += 0x9E3779B97F4A7C15
	z := *state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Index returns the cell index of level for a key whose 64-bit hash is h,
// in a row of m cells: the default layout that both this package and
// sketch/reference use, so the two can be compared cell for cell.
//
// Kirsch-Mitzenmacher double hashing: h1 and h2 are the low and high 32
// bits of h (h2 forced odd so levels never coincide for lack of a step),
// g = h1 + level*h2 mod 2^32, reduced to [0, m) with Lemire's
// multiply-shift instead of a division (grudge uses mod m; the
// multiply-shift is as uniform for m << 2^32 and costs no divide). Caveat
// shared with grudge (and every double-hashing scheme): the L indices are
// fixed by two values, so two keys share every level with probability
// about 1/m^2, not 1/m^L (a pair whose h1 and h2 agree in their top bits:
// 1e-6 at m = 1024, whatever L); estimates stay one-sided, such a pair
// just counts as one key. The reduction uses the high bits of g, so a custom Hasher
// must mix all 64 bits (XXH3 and SipHash do; an identity hash of small
// integers would put every key in cell 0).
func Index(h uint64, level, m uint32) uint32 {
	h1 := uint32(h)
	h2 := uint32(h>>32) | 1
	g := h1 + level*h2
	return uint32((uint64(g) * uint64(m)) >> 32)
}
