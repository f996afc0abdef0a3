//go:build 386 || arm || mips || mipsle || wasm

package law

// The module needs a native 64-bit platform (README.md, "Platforms"):
// sizes, byte counts and line counts are ints that reach 2^32 and beyond
// (sketch.DefaultMaxBytes is 4 GiB), the cells are 64-bit words updated
// with atomics, and rows are padded to the cache line x/sys/cpu reports
// (none on wasm). This file compiles only on Go's 32-bit ports and on
// wasm, so a build there stops in the package that every public package
// but asm imports, with an error that names the reason ("undefined:
// grudgeNeedsA64BitNativePlatform"), not deep in a size computation.
var _ = grudgeNeedsA64BitNativePlatform
