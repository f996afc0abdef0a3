module github.com/lfgrudge/grudge/tests

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/dchest/siphash v1.2.3
	github.com/lfgrudge/grudge v0.0.0
	github.com/spaolacci/murmur3 v1.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/lfgrudge/grudge => ../
