# Two commands do everything: `make bench` and `make test` (see README.md).
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 300ms
QEMU      ?= qemu-aarch64-static
ARM64_BIN := bin/arm64

.PHONY: all test test-race test-purego test-arm64 vet fmt fmt-check cover bench bench-go clean

all: test

## test: the whole suite: format and vet (amd64 + arm64), race tests,
## purego tests, and the arm64 suite under qemu.
test: fmt-check vet test-race test-purego test-arm64
	@echo "make test: all checks passed"

test-race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

test-purego:
	$(GO) test -tags purego -count=1 -short -timeout 10m $(PKGS)

## test-arm64: cross-compile every package's tests for arm64 and run them
## under qemu user emulation (-short: emulation is slow).
test-arm64:
	@if ! command -v $(QEMU) >/dev/null 2>&1; then \
		if [ -n "$$CI" ]; then echo "test-arm64: $(QEMU) not found (apt-get install -y qemu-user-static)"; exit 1; fi; \
		echo "test-arm64: SKIPPED: $(QEMU) not found; install it with: apt-get install -y qemu-user-static"; exit 0; \
	fi; \
	set -e; mkdir -p $(ARM64_BIN); \
	for p in $$($(GO) list -f '{{if .TestGoFiles}}{{.ImportPath}}{{else if .XTestGoFiles}}{{.ImportPath}}{{end}}' $(PKGS)); do \
		n=$$(echo $$p | tr / _); \
		GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(ARM64_BIN)/$$n.test $$p; \
		d=$$($(GO) list -f '{{.Dir}}' $$p); \
		echo "arm64 (qemu): $$p"; \
		(cd $$d && $(QEMU) $(CURDIR)/$(ARM64_BIN)/$$n.test -test.short -test.timeout 10m) ; \
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

## bench: the go test benchmarks (the contention matrix replaces this when it lands).
bench: bench-go

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
