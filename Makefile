# Two commands do everything: `make bench` and `make test` (see README.md).
#
# The repository holds five modules: the library (.), its tests that need
# test-only modules (tests/: rapid, porcupine, goleak), the measurements
# (bench/: the contention matrix, plots, the benchmarks against
# x/time/rate and hrtime), the example servers (examples/: the routers)
# and the Redis module (redis/). go.work lists
# them for development; every step below runs in each module that has
# it, and the tidy check runs with GOWORK=off, as a user's build does.
GO        ?= go
QEMU      ?= qemu-aarch64-static
ARM64_BIN := bin/arm64
AMD64V3_BIN := bin/amd64v3
# The Go modules of the repository that replace the library by this
# checkout, as directories (redis/ requires the library at its planned
# tag and has its own steps: test-redis). examples/ holds the servers
# behind limit/httplimit on net/http, chi, echo and gin, so the routers
# stay out of the library's module graph.
MODULES   := . tests bench examples
# The modules whose packages are the library's and its tests: raced,
# run under purego and on arm64.
CORE_MODULES := . tests

STATICCHECK_VERSION ?= v0.8.2
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $$($(GO) env GOPATH)/bin/staticcheck)

.PHONY: all deps test lint tidy-check tidy-check-redis tidy-redis test-race test-purego test-nobackoff test-arm64 test-amd64v3 test-emulated-with-redis test-redis test-bench test-examples vet fmt fmt-check cover bench bench-go bench-arm64 bench-matrix clean

all: test

## test: the whole suite, after installing what it needs (deps): format,
## vet (amd64 + arm64 + purego), staticcheck, go mod tidy, race tests of
## the library and of tests/ (the consumer check included), purego tests,
## the no-backoff build, the arm64 suite under qemu (ARM64_SKIP), the
## GOAMD64=v3 build of the rounding arguments' packages (V3_EMULATED:
## fused multiply-adds), the bench module's
## tests, the examples module's, and the redis/ module (vet, staticcheck, its tidy check, race
## tests against real redis-servers and a Redis Cluster), the last
## beside the arm64 and v3 steps (test-emulated-with-redis).
test: deps fmt-check vet lint tidy-check test-race test-purego test-nobackoff test-emulated-with-redis test-bench test-examples
	@echo "make test: all checks passed"

## test-emulated-with-redis: test-redis, which waits on its servers most
## of the time, beside test-arm64 then test-amd64v3, which use every CPU
## and run at a lower priority (nice 10) so the Redis tests get a CPU
## whenever they want one (.ci/alongside). The Redis module's output is
## printed when the emulated steps have ended.
test-emulated-with-redis:
	@bash .ci/alongside '$(MAKE) --no-print-directory test-redis' '$(MAKE) --no-print-directory test-arm64 test-amd64v3'

## deps: install what the tests need when it is missing: qemu-user-static
## (the arm64 suite) and redis-server with redis-cli (redis/: standalone
## servers and a 3-master cluster; Debian's redis-server pulls in
## redis-tools) with apt-get when run as root, otherwise print the exact
## command and fail; staticcheck with go install.
deps:
	@missing=""; \
	command -v $(QEMU) >/dev/null 2>&1 || missing="$$missing qemu-user-static"; \
	{ command -v redis-server && command -v redis-cli; } >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make test: installing$$missing"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get update -qq && apt-get install -y -qq$$missing >/dev/null || exit 1; \
		else \
			echo "make test: missing$$missing; install it with: sudo apt-get install -y$$missing"; exit 1; \
		fi; \
	fi
	@if [ ! -x "$(STATICCHECK)" ]; then \
		echo "make test: installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || exit 1; \
	fi

## lint: staticcheck in every module.
lint:
	@for m in $(MODULES); do echo "staticcheck: $$m"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

## tidy-check: go mod tidy must leave every module's go.mod and go.sum
## unchanged (GOWORK=off: each module stands alone).
tidy-check:
	@for m in $(MODULES); do \
		(cd $$m && cp go.mod go.mod.tidy-bak && cp go.sum go.sum.tidy-bak && GOWORK=off $(GO) mod tidy; \
		if ! cmp -s go.mod go.mod.tidy-bak || ! cmp -s go.sum go.sum.tidy-bak; then \
			echo "tidy-check: go mod tidy changed $$m/go.mod or go.sum; run go mod tidy there and commit"; \
			mv go.mod.tidy-bak go.mod; mv go.sum.tidy-bak go.sum; exit 1; \
		fi; rm -f go.mod.tidy-bak go.sum.tidy-bak) || exit 1; \
	done

## test-race: the race tests of the library and of tests/, the two
## modules side by side (.ci/side-by-side: each module's output printed
## when it ends).
test-race:
	@bash .ci/side-by-side race "$(CORE_MODULES)" '$(GO) test -race -count=1 -timeout 20m ./...'

## test-purego: the pure-Go build at full size: no -short, no race
## detector. The only step where the heavy single-goroutine sweeps run
## their whole grids (internal/testsize: -race and -short run a sample).
## Built with -d=checkptr (the unsafe.Pointer checks that -race turns
## on), for the tests that skip under -race (testsize.Serial).
test-purego:
	@bash .ci/side-by-side purego "$(CORE_MODULES)" '$(GO) test -tags purego $(CHECKPTR) -count=1 -timeout 10m ./...'

## test-nobackoff: the cell and sketch tests with the contention backoff
## compiled out (-tags grudge_nobackoff, the build bench/run16.sh compares
## against), so that build stays correct.
test-nobackoff:
	$(GO) test -tags grudge_nobackoff -count=1 -short -timeout 10m ./internal/atom/ ./internal/core/ ./sketch/
	cd tests && $(GO) test -tags grudge_nobackoff -count=1 -short -timeout 10m ./internal/atom/ ./sketch/

## test-arm64: cross-compile the tests of the library and of tests/ for
## arm64 and run them under qemu user emulation (-short: emulation is
## slow), as many binaries at once as there are CPUs (.ci/cross-tests):
## every package of the library but the façade's (the root package), and
## of tests/ the twins of the rounding arguments (ARM64_SKIP leaves out
## the others: the model, oracle and linearizability suites of limit,
## meter, rotator and the façade, whose code has no fused site
## (.ci/fma-sites.txt) and whose concurrency qemu runs with the host's
## memory order anyway; they run natively under -race and purego).
## ARM64_ALL=1 (any non-empty value) runs every package.
ARM64_SKIP := github.com/lfgrudge/grudge github.com/lfgrudge/grudge/tests .*/tests/limit .*/tests/limit/httplimit .*/tests/meter .*/tests/rotator .*/tests/grudge .*/tests/grudgetest .*/tests/internal/ref
test-arm64:
	SKIP="$(if $(ARM64_ALL),,$(ARM64_SKIP))" GOARCH=arm64 GO=$(GO) bash .ci/cross-tests "arm64 (qemu)" $(ARM64_BIN) $(QEMU) $(CORE_MODULES)

## test-amd64v3: the tests of the library and of tests/ built with
## GOAMD64=v3 (-short), where the compiler fuses a multiply into a
## following add (VFMADD231SD), as arm64 fuses more: code whose argument
## relies on how each step rounds must say so with a conversion
## (docs/design.md, "Fused multiply-add"). Run directly on a CPU with the
## v3 features (/proc/cpuinfo), else under qemu-x86_64-static -cpu max.
## Only the packages of the rounding arguments run (V3_EMULATED: the
## exact sums, the decay laws, the cell, the sizing model, the
## conformance checks, the sketch's twin digests, and their tests/
## twins), which hold every site
## the compiler fuses (.ci/fma-sites.txt, checked by `make vet`): under
## qemu a few minutes on 2 vCPUs where the whole suite takes about 8,
## natively about 1 where it takes about 4; arm64, which fuses every
## site v3 fuses and more, runs it all. V3_ALL=1 (any non-empty value)
## runs every package.
## Built with -d=checkptr, as test-purego is.
V3_FLAGS := avx avx2 bmi1 bmi2 f16c fma abm movbe xsave
V3_EMULATED := .*/internal/atom .*/internal/law .*/internal/core .*/internal/bucket .*/decay .*/sketch/sketchtest github.com/lfgrudge/grudge/sketch
CHECKPTR := -gcflags=github.com/lfgrudge/grudge/...=-d=checkptr
test-amd64v3:
	@emu=; only=; for f in $(V3_FLAGS); do grep -qw $$f /proc/cpuinfo 2>/dev/null || emu=$(CURDIR)/.ci/qemu-x86_64-v3; done; \
	if [ -n "$$emu" ]; then \
		echo "test-amd64v3: this CPU lacks a v3 feature; running under $$emu"; \
	fi; \
	[ -n "$(V3_ALL)" ] || only="$(V3_EMULATED)"; \
	ONLY="$$only" GOARCH=amd64 GOAMD64=v3 GOFLAGS="$$GOFLAGS $(CHECKPTR)" GO=$(GO) bash .ci/cross-tests "amd64 v3" $(AMD64V3_BIN) "$$emu" $(CORE_MODULES)

## test-bench: the bench module's own tests (the matrix's report, plots,
## options), raced.
test-bench:
	cd bench && $(GO) test -race -count=1 -timeout 10m ./...

## test-examples: the example servers (examples/: net/http, chi, echo,
## gin) built and driven through their handlers, raced.
test-examples:
	cd examples && $(GO) test -race -count=1 -timeout 10m ./...

## test-redis: the nested module redis/ (its own go.mod; the core module
## has no Redis dependency), built through the go.work workspace at the
## root: vet, staticcheck, its go mod tidy check, then the race tests
## against redis-servers the tests start themselves on loopback ports (a
## standalone server per test and one 3-master Redis Cluster made with
## redis-cli --cluster create; they fail without redis-server/redis-cli
## when CI is set). Its race run takes about 7 minutes here beside the
## emulated steps (8.5 under more load), so its timeout leaves room.
test-redis: tidy-check-redis
	cd redis && $(GO) vet ./...
	cd redis && $(STATICCHECK) ./...
	cd redis && $(GO) test -race -count=1 -timeout 20m ./...

## tidy-check-redis: go mod tidy must leave redis/go.mod and redis/go.sum
## unchanged. redis/go.mod requires the core at CORE_VERSION, which is not
## on the module proxy yet, and go mod tidy ignores go.work: so tidy runs on
## a copy of go.mod (-modfile) with a replace of exactly that version by this
## checkout, the workspace's own replace, and the result without that line
## must equal the committed files. No network beyond the module proxy.
CORE_VERSION ?= v0.1.0
tidy-check-redis:
	@set -e; t=$$(mktemp -d); trap 'rm -rf "$$t"' EXIT; \
	cp redis/go.mod "$$t/go.mod"; cp redis/go.sum "$$t/go.sum"; \
	echo "replace github.com/lfgrudge/grudge $(CORE_VERSION) => $(CURDIR)" >> "$$t/go.mod"; \
	(cd redis && GOWORK=off $(GO) mod tidy -modfile="$$t/go.mod"); \
	grep -v '^replace github.com/lfgrudge/grudge ' "$$t/go.mod" > "$$t/go.mod.tidy"; \
	if ! cmp -s "$$t/go.mod.tidy" redis/go.mod || ! cmp -s "$$t/go.sum" redis/go.sum; then \
		echo "tidy-check-redis: go mod tidy would change redis/go.mod or redis/go.sum:"; \
		diff redis/go.mod "$$t/go.mod.tidy" || true; diff redis/go.sum "$$t/go.sum" || true; \
		echo "fix: cp the tidied files over (make tidy-redis)"; exit 1; \
	fi

## tidy-redis: go mod tidy for redis/ (the same -modfile way), writing the
## result back.
tidy-redis:
	@set -e; t=$$(mktemp -d); trap 'rm -rf "$$t"' EXIT; \
	cp redis/go.mod "$$t/go.mod"; cp redis/go.sum "$$t/go.sum"; \
	echo "replace github.com/lfgrudge/grudge $(CORE_VERSION) => $(CURDIR)" >> "$$t/go.mod"; \
	(cd redis && GOWORK=off $(GO) mod tidy -modfile="$$t/go.mod"); \
	grep -v '^replace github.com/lfgrudge/grudge ' "$$t/go.mod" > redis/go.mod; cp "$$t/go.sum" redis/go.sum

## vet: go vet (amd64, arm64, purego) in every module, the fused
## multiply-adds of the non-test code against their reviewed list
## (.ci/fma-sites; docs/design.md, "Fused multiply-add"), and the
## platform promise (.ci/platforms: the other 64-bit ports build; the
## 32-bit ports and wasm stop with the error README.md names).
vet:
	@for m in $(MODULES); do \
		(cd $$m && $(GO) vet ./... && GOARCH=arm64 $(GO) vet ./... && $(GO) vet -tags purego ./...) || exit 1; \
	done
	@GO=$(GO) bash .ci/fma-sites
	@GO=$(GO) bash .ci/platforms

fmt:
	gofmt -w .

fmt-check:
	@f=$$(gofmt -l .); if [ -n "$$f" ]; then echo "gofmt would change:"; echo "$$f"; exit 1; fi

cover:
	mkdir -p bin
	$(GO) test -count=1 -coverprofile=bin/cover.out -coverpkg=github.com/lfgrudge/grudge/... ./... ./tests/...
	$(GO) tool cover -func=bin/cover.out | tail -1

## bench: the contention matrix (bench/cmd/matrix): lockfree, reference
## and atomicadd on every workload and dist, both clocks, P=1, 2, 4, ...
## and the usable CPUs (affinity set, CPU quota),
## a 250ms warm-up of the first row (-warmup), then 3 interleaved repeats
## of 250ms per cell (-count, -duration; -impls all adds the rotators and
## ratemap). About 5.5 minutes on 2 cores (5 min 36 s at bc3d4d3). Markdown
## on stdout (median (min–max) per cell, ⚠ on a spread above -spread
## 0.25), a progress line per cell per round on stderr, and results.csv,
## results.json, results.md and PNG plots (throughput, ratio, latency per
## clock) in bench-results/. MATRIX_FLAGS passes flags, e.g.
## MATRIX_FLAGS='-impls lockfree,reference -duration 1s' (go run
## ./cmd/matrix -h in bench/ lists them). bench-go runs the go test
## benchmarks; docs/benchmarks.md has the numbers.
MATRIX_FLAGS ?=
bench:
	cd bench && $(GO) run ./cmd/matrix -out $(CURDIR)/bench-results $(MATRIX_FLAGS)

BENCHTIME ?= 300ms
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## bench-arm64: cross-compile the matrix and its tests for arm64 and run
## both under qemu user emulation, with tiny cells (emulated timings are
## meaningless; this checks that it builds and runs).
bench-arm64:
	mkdir -p $(ARM64_BIN)
	cd bench && GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o $(CURDIR)/$(ARM64_BIN)/matrix ./cmd/matrix
	cd bench && GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(CURDIR)/$(ARM64_BIN)/bench_matrix.test ./matrix
	cd bench/matrix && GRUDGE_TEST_EMULATOR=$(QEMU) $(QEMU) $(CURDIR)/$(ARM64_BIN)/bench_matrix.test -test.short -test.timeout 5m
	$(QEMU) $(ARM64_BIN)/matrix -impls lockfree,reference -workloads update,tryupdate-denied \
		-dists uniform,hot8 -procs 1,2 -duration 20ms -count 2 -keys 4096 -stream 4096 -out $(ARM64_BIN)/bench-results

## bench-matrix: build the matrix (also without the contention backoff)
## and the sketch benchmarks as static binaries (bin/matrix,
## bin/matrix-nobackoff, bin/sketch.test, bin/asm.test) for bench/run16.sh
## and bench/backoff16.sh on another
## machine.
COMMIT = $$(git describe --always --dirty 2>/dev/null || echo unknown)
bench-matrix:
	mkdir -p bin
	echo $(COMMIT) > bin/COMMIT
	cd bench && CGO_ENABLED=0 $(GO) build -ldflags "-X main.commit=$(COMMIT)" -o $(CURDIR)/bin/matrix ./cmd/matrix
	cd bench && CGO_ENABLED=0 $(GO) build -tags grudge_nobackoff -ldflags "-X main.commit=$(COMMIT)-nobackoff" -o $(CURDIR)/bin/matrix-nobackoff ./cmd/matrix
	cd bench && CGO_ENABLED=0 $(GO) test -c -o $(CURDIR)/bin/sketch.test ./sketch/
	CGO_ENABLED=0 $(GO) test -c -o $(CURDIR)/bin/asm.test ./asm/

clean:
	rm -rf bin
