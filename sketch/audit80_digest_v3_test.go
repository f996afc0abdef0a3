//go:build amd64.v3

package sketch_test

// twinDigest is TestAudit80PublicTwinDigest's digest, recorded with
// -tags purego at GOAMD64=v3: from v3 on the compiler fuses a multiply
// into a following add (VFMADD231SD; the exponential law's upward nudge,
// docs/design.md "Fused multiply-add"), so the decayed values differ in
// their last bits from v1's.
const twinDigest = "234b720801dcfba829679e0a67d8aa39f3814ee19d3fbd5684214b2b14df527f"
