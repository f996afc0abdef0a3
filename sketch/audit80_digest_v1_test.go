//go:build !amd64.v3

package sketch_test

// twinDigest is TestAudit80PublicTwinDigest's digest, recorded with
// -tags purego at GOAMD64=v1 (v2 compiles the same floating point).
const twinDigest = "9df5cf312768ef6ac7a600860f9b96f6a858b879fe8d3b9ace346de2d16110d8"
