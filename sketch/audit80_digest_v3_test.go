//go:build amd64.v3

package sketch_test

// twinDigest is TestAudit80PublicTwinDigest's digest, recorded with
// -tags purego at GOAMD64=v3: from v3 on the compiler fuses a multiply
// into a following add (VFMADD231SD; the exponential law's upward nudge,
// docs/design.md "Fused multiply-add"), so the decayed values differ in
// their last bits from v1's.
const twinDigest = "52c3de3db66f18d894e73ba297a99a6d02062fa65d08ad3248fe906078b63c78"
