//go:build !amd64.v3

package sketch_test

// twinDigest is TestAudit80PublicTwinDigest's digest, recorded with
// -tags purego at GOAMD64=v1 (v2 compiles the same floating point).
const twinDigest = "1816eccde3e253ca89c7653a8f2d43b05655aa935158eacb4e20d89a2a3d1cee"
