package grudge

import (
	"math/rand/v2"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/spaolacci/murmur3"
)

// Hasher maps a key to 64 bits. Implementations must be safe for
// concurrent use and must not retain or modify key. Level l of a key uses
// the cell (h1 + l*h2) reduced to [0, M), h1 and h2 the low and high 32
// bits of the hash (h2 forced odd, so that no key's levels share a step
// of 0), so a Hasher must mix all 64 bits.
type Hasher interface {
	Hash64(key []byte) uint64
}

// HasherFactory builds a Hasher from a seed. Each Sketch (each rotator
// generation) draws its own seed. It must return a non-nil Hasher for every
// seed: New and NewRotator report a nil one as a *ConfigError naming
// Hasher; a lazy rotator's promotion, which draws a new seed during an
// operation, panics in that operation, and a Ticker-driven one in the
// rotator's goroutine, which ends the program. The sketch hashes with
// Hash64, whatever other methods the Hasher's type has.
type HasherFactory func(seed uint64) Hasher

// Murmur3 returns the default factory: MurmurHash3 x64 (the first 64 bits
// of the 128-bit variant, github.com/spaolacci/murmur3, the module grudge
// uses), seeded with the seed folded to 32 bits. Fast, not keyed: use
// SipHash when clients choose keys.
func Murmur3() HasherFactory {
	return func(seed uint64) Hasher { return murmurHasher(uint32(seed) ^ uint32(seed>>32)) }
}

type murmurHasher uint32

func (h murmurHasher) Hash64(key []byte) uint64 { return murmur3.Sum64WithSeed(key, uint32(h)) }
func (h murmurHasher) Sum64(key []byte) uint64  { return murmur3.Sum64WithSeed(key, uint32(h)) }
func (h murmurHasher) Sum64String(key string) uint64 {
	return murmur3.Sum64WithSeed(bytesOf(key), uint32(h))
}

// SipHash returns the keyed-PRF factory: SipHash-2-4 under a 128-bit key
// expanded from the seed with two rounds of splitmix64 (sketch.SipHash).
// The seed is drawn at random per sketch, so it is secret.
func SipHash() HasherFactory {
	core := sketch.SipHash()
	return func(seed uint64) Hasher { return nativeHasher{core(seed)} }
}

// nativeHasher gives a core hasher grudge's method name.
type nativeHasher struct{ sketch.Hasher }

func (h nativeHasher) Hash64(key []byte) uint64 { return h.Sum64(key) }

// foreignHasher runs a user's Hasher in the core.
type foreignHasher struct{ h Hasher }

func (f foreignHasher) Sum64(key []byte) uint64       { return f.h.Hash64(key) }
func (f foreignHasher) Sum64String(key string) uint64 { return f.h.Hash64(bytesOf(key)) }

// bytesOf views key's bytes without copying; Hashers only read their key.
func bytesOf(key string) []byte { return unsafe.Slice(unsafe.StringData(key), len(key)) }

// coreHasher adapts f (nil means Murmur3) to the core's factory.
func coreHasher(f HasherFactory) sketch.HasherFactory {
	if f == nil {
		f = Murmur3()
	}
	return func(seed uint64) sketch.Hasher {
		// Only the module's own hashers take the core's methods directly:
		// a user's Hasher is hashed with Hash64, as grudge does, even
		// when its type also has methods named Sum64 and Sum64String.
		switch h := f(seed).(type) {
		case nativeHasher:
			return h.Hasher
		case murmurHasher:
			return h
		case nil:
			return nil // New reports it: the Hasher field's factory returned nil
		default:
			if core.IsNil(h) {
				return nil // a typed nil too (audit 140): New reports it
			}
			return foreignHasher{h}
		}
	}
}

// newSeed draws a sketch's hash seed from the runtime's
// cryptographically seeded generator, so that SipHash is keyed by a secret.
func newSeed() uint64 { return rand.Uint64() }
