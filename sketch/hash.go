package sketch

import "github.com/lfgrudge/grudge/internal/core"

// Hasher maps a key to 64 bits. Implementations must be safe for
// concurrent use and must not retain or modify key.
type Hasher interface {
	Sum64(key []byte) uint64
	Sum64String(key string) uint64
}

// HasherFactory builds a Hasher from Config.Seed. Sketches with different
// seeds (the rotator's generations) use independent hash functions.
// It must return a non-nil Hasher for every seed: New, rotator.New,
// limit.New, redis.New and a snapshot restore report a nil one as a
// *ConfigError naming Hasher; a rotator's promotion, which draws a new
// seed during an operation, panics on one.
type HasherFactory func(seed uint64) Hasher

// XXH3 returns the default hasher factory: XXH3-64 (github.com/zeebo/xxh3)
// seeded with Config.Seed. Fast and well distributed, but not a keyed PRF:
// an attacker who knows the seed (or can probe the sketch) can craft
// colliding keys. Use SipHash for keys that come from clients.
func XXH3() HasherFactory {
	f := core.XXH3()
	return func(seed uint64) Hasher { return f(seed) }
}

// SipHash returns the keyed-PRF hasher factory: SipHash-2-4
// (github.com/dchest/siphash) under a 128-bit key expanded from
// Config.Seed with two rounds of splitmix64 (as grudge does). Choose it,
// with a secret seed (RandomSeed), when keys come from clients.
func SipHash() HasherFactory {
	f := core.SipHash()
	return func(seed uint64) Hasher { return f(seed) }
}

// RandomSeed returns 8 bytes from crypto/rand as a Config.Seed: the
// secret seed SipHash needs when keys come from clients.
func RandomSeed() uint64 { return core.RandomSeed() }
