# Two commands do everything: `make bench` and `make test` (see README.md).
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 300ms
QEMU      ?= qemu-aarch64-static
ARM64_BIN := bin/arm64

.PHONY: all lint tidy-check test test-race test-purego test-nobackoff test-arm64 vet fmt fmt-check cover bench bench-go clean

all: test

## test: the whole suite: format, vet (amd64 + arm64 + purego),
## staticcheck, go mod tidy, race tests, purego tests, the no-backoff
## build, the arm64 suite under qemu, and the redis/ module against a real
## redis-server.
test: fmt-check vet lint tidy-check test-race test-purego test-nobackoff test-arm64 test-redis
	@echo "make test: all checks passed"

## lint: staticcheck (installed by .ci/run; go install
## honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $$($(GO) env GOPATH)/bin/staticcheck)
lint:
	@if [ ! -x "$(STATICCHECK)" ]; then \
		echo "lint: staticcheck not found; install it with: go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)"; exit 1; \
	fi
	$(STATICCHECK) ./...

## tidy-check: go mod tidy must leave go.mod and go.sum unchanged.
tidy-check:
	@cp go.mod bin-go.mod.bak && cp go.sum bin-go.sum.bak; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod bin-go.mod.bak || ! cmp -s go.sum bin-go.sum.bak; then \
		echo "tidy-check: go mod tidy changed go.mod/go.sum; run go mod tidy and commit"; \
		mv bin-go.mod.bak go.mod; mv bin-go.sum.bak go.sum; exit 1; \
	fi; rm -f bin-go.mod.bak bin-go.sum.bak

test-race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

test-purego:
	$(GO) test -tags purego -count=1 -short -timeout 10m $(PKGS)

## test-nobackoff: the cell and sketch tests with the contention backoff
## compiled out (-tags grudge_nobackoff, the build bench/run16.sh compares
## against), so that build stays correct.
test-nobackoff:
	$(GO) test -tags grudge_nobackoff -count=1 -short -timeout 10m ./internal/atom/ ./internal/core/ ./sketch/

## test-arm64: cross-compile every package's tests for arm64 and run them
## under qemu user emulation (-short: emulation is slow).
test-arm64:
	@if ! command -v $(QEMU) >/dev/null 2>&1; then \
		echo "test-arm64: $(QEMU) not found; install it with: apt-get install -y qemu-user-static (.ci/run does)"; exit 1; \
	fi; \
	set -e; mkdir -p $(ARM64_BIN); \
	for p in $$($(GO) list -f '{{if .TestGoFiles}}{{.ImportPath}}{{else if .XTestGoFiles}}{{.ImportPath}}{{end}}' $(PKGS)); do \
		n=$$(echo $$p | tr / _); \
		GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(ARM64_BIN)/$$n.test $$p; \
		d=$$($(GO) list -f '{{.Dir}}' $$p); \
		echo "arm64 (qemu): $$p"; \
		(cd $$d && GRUDGE_TEST_EMULATOR=$(QEMU) $(QEMU) $(CURDIR)/$(ARM64_BIN)/$$n.test -test.short -test.timeout 10m) ; \
	done

vet:
	$(GO) vet $(PKGS)
	GOARCH=arm64 $(GO) vet $(PKGS)
	$(GO) vet -tags purego $(PKGS)

fmt:
	gofmt -w .

fmt-check:
	@f=$$(gofmt -l .); if [ -n "$$f" ]; then echo "gofmt would change:"; echo "$$f"; exit 1; fi

cover:
	$(GO) test -count=1 -coverprofile=bin/cover.out $(PKGS)
	$(GO) tool cover -func=bin/cover.out | tail -1

## bench: the contention matrix (bench/cmd/matrix): lockfree, reference
## and atomicadd on every workload and dist, both clocks, P=1..NumCPU,
## 3 interleaved repeats of 250ms per cell (-count, -duration; -impls all
## adds the rotators and ratemap). Measured: `time make bench` 4 min 48 s
## (288 s, compile included; 286 s in the run) on the 2-core VM, shared
## with other jobs (load ~6). Markdown on stdout (median (min–max) per
## cell, ⚠ on a spread above -spread 0.25), a progress line per cell per
## round on stderr, and results.csv, results.json, results.md and PNG plots
## (throughput, ratio, latency per clock) in bench-results/.
## MATRIX_FLAGS passes flags, e.g. MATRIX_FLAGS='-impls lockfree,reference
## -duration 1s' (go run ./bench/cmd/matrix -h lists them). bench-go runs
## the go test benchmarks; docs/benchmarks.md has the numbers.
MATRIX_FLAGS ?=
bench:
	$(GO) run ./bench/cmd/matrix $(MATRIX_FLAGS)

## bench-arm64: cross-compile the matrix and its tests for arm64 and run
## both under qemu user emulation, with tiny cells (emulated timings are
## meaningless; this checks that it builds and runs).
bench-arm64:
	@if ! command -v $(QEMU) >/dev/null 2>&1; then \
		echo "bench-arm64: $(QEMU) not found; install it with: apt-get install -y qemu-user-static"; exit 1; \
	fi
	mkdir -p $(ARM64_BIN)
	GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o $(ARM64_BIN)/matrix ./bench/cmd/matrix
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(ARM64_BIN)/bench_matrix.test ./bench/matrix
	cd bench/matrix && $(QEMU) $(CURDIR)/$(ARM64_BIN)/bench_matrix.test -test.short -test.timeout 5m
	$(QEMU) $(ARM64_BIN)/matrix -impls lockfree,reference -workloads update,tryupdate-denied \
		-dists uniform,hot8 -procs 1,2 -duration 20ms -count 2 -keys 4096 -stream 4096 -out $(ARM64_BIN)/bench-results

## bench-matrix: build the matrix (also without the contention backoff)
## and the sketch benchmarks as static binaries (bin/matrix,
## bin/matrix-nobackoff, bin/sketch.test) for bench/run16.sh on another
## machine.
bench-matrix:
	mkdir -p bin
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.commit=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" -o bin/matrix ./bench/cmd/matrix
	CGO_ENABLED=0 $(GO) build -tags grudge_nobackoff -ldflags "-X main.commit=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)-nobackoff" -o bin/matrix-nobackoff ./bench/cmd/matrix
	CGO_ENABLED=0 $(GO) test -c -o bin/sketch.test ./sketch/

.PHONY: bench-arm64 bench-matrix

## test-redis: the nested module redis/ (its own go.mod; the core module
## has no Redis dependency): vet and race tests against a redis-server the
## tests start themselves (they fail without one when CI is set).
test-redis:
	cd redis && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

.PHONY: test-redis

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
