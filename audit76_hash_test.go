package grudge_test

import (
	"fmt"
	"testing"

	"github.com/dchest/siphash"
	grudge "github.com/lfgrudge/grudge"
	"github.com/spaolacci/murmur3"
)

// a76SplitMix64 is the standard splitmix64 step (Steele, Lea, Flood).
func a76SplitMix64(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TestAudit76HashersIndependent checks the root hashers against
// independent implementations: SipHash-2-4 (github.com/dchest/siphash)
// keyed with two consecutive splitmix64 outputs of the seed
// (REFERENCE.md: "SipHash-2-4 keyed from a uint64 seed expanded with two
// rounds of splitmix64"; migrating.md, "Hashing"), and Murmur3 as the
// first 64 bits of MurmurHash3 x64-128 with the seed folded to 32 bits.
func TestAudit76HashersIndependent(t *testing.T) {
	seeds := []uint64{0, 1, 42, 1 << 32, 0xdeadbeefcafebabe, ^uint64(0)}
	keys := [][]byte{nil, {}, []byte("a"), []byte("hello, world"), make([]byte, 100)}
	for _, seed := range seeds {
		st := seed
		k0 := a76SplitMix64(&st)
		k1 := a76SplitMix64(&st)
		sip := grudge.SipHash()(seed)
		mm := grudge.Murmur3()(seed)
		for _, k := range keys {
			if got, want := sip.Hash64(k), siphash.Hash(k0, k1, k); got != want {
				t.Errorf("SipHash()(%#x).Hash64(%q) = %#x, independent SipHash-2-4 with splitmix64 key = %#x", seed, k, got, want)
			}
			fold := uint32(seed) ^ uint32(seed>>32)
			if got, want := mm.Hash64(k), murmur3.Sum64WithSeed(k, fold); got != want {
				t.Errorf("Murmur3()(%#x).Hash64(%q) = %#x, murmur3 with the folded seed = %#x", seed, k, got, want)
			}
			h1, _ := murmur3.Sum128WithSeed(k, uint32(seed)^uint32(seed>>32))
			if mm.Hash64(k) != h1 {
				t.Errorf("Murmur3 is not the first 64 bits of x64-128 for %q", k)
			}
		}
	}
	_ = fmt.Sprint()
}
