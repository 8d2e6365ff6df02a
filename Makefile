# Jejak — the two commands are `make run` and `make test`; everything they need
# is installed by the targets below when it is missing. `make check` is the
# quick inner loop (no browser, no -race); `make test` is the whole suite.
GO      ?= go
SQLC    := $(GO) tool -modfile=tools/go.mod sqlc
TEMPL   := $(GO) tool templ

.PHONY: run test check generate check-generated vet deps-postgres deps-chromium bench bench-quiet build chaos

## run: dashboard + workers + demo data on the embedded PostgreSQL (or DATABASE_URL)
run: deps-postgres build
	./bin/web serve --demo

## test: every test, on a real PostgreSQL and a real headless Chromium
## (JEJAK_SKIP_BROWSER is cleared: make test never leaves a browser test out)
test: deps-postgres deps-chromium check-generated vet
	JEJAK_SKIP_BROWSER= $(GO) test -race $(TESTFLAGS) -timeout 20m ./...
	cd bench && $(GO) vet -trimpath ./... && $(GO) test $(TESTFLAGS) -timeout 10m ./...

# Flags of every go test run here. go vet ./... (a superset of the checks
# go test runs first) has already run on every package and its tests.
# -ldflags=-w: no DWARF in the test binaries (a third of each link; stack
# traces come from the symbol table, which stays). -trimpath (vet too):
# without it the build cache keys the module's packages by the folder of
# the checkout, so a second clone compiled everything again; with it every
# clone on the machine shares the compiled packages and linked binaries
# (a fresh clone's first make check: 109-127 s before, 88 s after).
# make test runs tests and packages at go test's defaults: on two cores,
# four tests at a time and the two modules side by side took it from
# about 6 to over 10 minutes on a quiet machine (the race detector and up
# to four Chromium tabs at once). make check, without either, runs four
# tests at a time: its tests mostly wait (on PostgreSQL's checkpoint at
# each DROP DATABASE, on engine intervals).
TESTFLAGS ?= -vet=off -trimpath -ldflags=-w -count=1

## check: the inner loop: generated code, vet, and every test that needs no
## browser, without -race (browser tests: named TestBrowser*, and any test
## reaching browsertest.New skips under JEJAK_SKIP_BROWSER=1); the bench
## module is vetted and unit-tested, its smoke run of every benchmark
## (-short skips it: minutes of load) is left to make test. The main
## module's test binaries are kept in .cache/testbin and linked again only
## when a change reaches them (tools/testbins.sh)
check: deps-postgres check-generated vet
	JEJAK_SKIP_BROWSER=1 GO=$(GO) tools/testbins.sh -test.parallel 4 -test.timeout 10m -test.skip '^TestBrowser'
	cd bench && $(GO) vet -trimpath ./... && $(GO) test $(TESTFLAGS) -short ./...

## generate: regenerate sqlc queries and templ components (committed)
generate:
	$(SQLC) generate
	$(TEMPL) generate -log-level error

## check-generated: fail when committed generated code is stale
check-generated: generate
	@if [ -n "$$(git status --porcelain -- internal/queries views)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; \
		git status --porcelain -- internal/queries views; exit 1; fi

vet:
	$(GO) vet -trimpath ./...

build:
	$(GO) build -o bin/web ./cmd/web

deps-postgres:
	@tools/ensure-postgres.sh

deps-chromium:
	@tools/ensure-chromium.sh

## bench: the benchmark program (see docs/benchmarks.md)
bench: deps-postgres
	cd bench && $(GO) run . $(BENCH_ARGS)

## bench-quiet: make bench, but every run first waits (at most
## BENCH_QUIET_WAIT) for the 1-minute load average to fall below
## BENCH_QUIET_LOAD; each figure carries the load it started at (load1=)
BENCH_QUIET_LOAD ?= 1.0
BENCH_QUIET_WAIT ?= 15m
bench-quiet: deps-postgres
	cd bench && $(GO) run . -quiet-load $(BENCH_QUIET_LOAD) -quiet-max-wait $(BENCH_QUIET_WAIT) $(BENCH_ARGS)

## chaos: replicas of the real binary under kill -9, a PostgreSQL crash and a
## network cut, 20,000 jobs (make test runs the same suite with 1,200); see
## docs/reliability.md
CHAOS_JOBS ?= 20000
chaos: deps-postgres
	JEJAK_CHAOS_JOBS=$(CHAOS_JOBS) $(GO) test -count=1 -v -timeout 30m -run TestChaos ./internal/chaos/
