package matrix

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// KeyLen is the length of every key in bytes.
const KeyLen = 16

// ZipfS and ZipfV are the parameters of the zipf distribution:
// P(rank k) ∝ (ZipfV + k)^-ZipfS.
const (
	ZipfS = 1.1
	ZipfV = 1
)

// Universe is the key space of a run: key i (0 <= i < n) is 16 bytes
// derived from i and the seed by a bijective mix, so distinct indexes
// give distinct keys and no key table is stored. Workers build each key
// in a buffer of their own, as a server has a request's key in cache
// when it consults the sketch: the keys cost the same few nanoseconds for
// every implementation and add no cache misses of their own.
type Universe struct {
	n    int
	seed uint64
}

// NewUniverse returns the universe of n keys for seed.
func NewUniverse(n int, seed uint64) *Universe { return &Universe{n: n, seed: seed} }

// Len returns the number of keys.
func (u *Universe) Len() int { return u.n }

// Put writes key i into k, which must be KeyLen long.
func (u *Universe) Put(k []byte, i uint32) {
	a := mix64(uint64(i) + u.seed*0x9E3779B97F4A7C15)
	binary.LittleEndian.PutUint64(k[:8], a)
	binary.LittleEndian.PutUint64(k[8:KeyLen], ^a)
}

// Key returns key i in a new slice.
func (u *Universe) Key(i uint32) []byte {
	k := make([]byte, KeyLen)
	u.Put(k, i)
	return k
}

// mix64 is the SplitMix64 finalizer (Stafford's Mix13): a bijection on
// uint64.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// distSize returns how many keys of a universe of n a distribution draws
// from (and so how many the pre-fill visits).
func distSize(dist string, n int) int {
	switch dist {
	case DistHot8:
		return min(8, n)
	case DistHot1:
		return 1
	}
	return n
}

// Stream returns a stream of length key indexes drawn from dist over a
// universe of n keys, for worker; the same (dist, n, length, seed, worker)
// always gives the same stream, and different workers get independent
// ones.
func Stream(dist string, n, length int, seed uint64, worker int) ([]uint32, error) {
	r := rand.New(rand.NewPCG(seed, uint64(worker)<<8|uint64(distCode(dist))))
	s := make([]uint32, length)
	switch dist {
	case DistUniform:
		for i := range s {
			s[i] = r.Uint32N(uint32(n))
		}
	case DistZipf:
		z := rand.NewZipf(r, ZipfS, ZipfV, uint64(n-1))
		for i := range s {
			s[i] = uint32(z.Uint64())
		}
	case DistHot8:
		for i := range s {
			s[i] = r.Uint32N(uint32(distSize(dist, n)))
		}
	case DistHot1:
		// all zero: key 0
	default:
		return nil, fmt.Errorf("matrix: unknown key distribution %q", dist)
	}
	return s, nil
}

func distCode(dist string) int {
	for i, d := range AllDists {
		if d == dist {
			return i + 1
		}
	}
	return 0
}
