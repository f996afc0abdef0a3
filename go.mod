module github.com/lfgrudge/grudge

go 1.25.0

require (
	github.com/dchest/siphash v1.2.3
	github.com/spaolacci/murmur3 v1.1.0
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/sys v0.47.0
)

require github.com/klauspost/cpuid/v2 v2.2.10 // indirect
