module github.com/lfgrudge/grudge/redis

go 1.26.0

require (
	github.com/lfgrudge/grudge v0.0.0
	github.com/redis/rueidis v1.0.80
	go.uber.org/goleak v1.3.0
)

require (
	github.com/dchest/siphash v1.2.3 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/lfgrudge/grudge => ../
