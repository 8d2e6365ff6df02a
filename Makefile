# Jejak — the two commands are `make run` and `make test`; everything they need
# is installed by the targets below when it is missing.
GO      ?= go
SQLC    := $(GO) tool -modfile=tools/go.mod sqlc
TEMPL   := $(GO) tool templ

.PHONY: run test generate check-generated vet deps-postgres deps-chromium bench build chaos

## run: dashboard + workers + demo data on the embedded PostgreSQL (or DATABASE_URL)
run: deps-postgres build
	./bin/web serve --demo

## test: every test, on a real PostgreSQL and a real headless Chromium
test: deps-postgres deps-chromium check-generated vet
	$(GO) test -race -count=1 -timeout 20m ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

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
	$(GO) vet ./...

build:
	$(GO) build -o bin/web ./cmd/web

deps-postgres:
	@tools/ensure-postgres.sh

deps-chromium:
	@tools/ensure-chromium.sh

## bench: the benchmark program (see docs/benchmarks.md)
bench: deps-postgres
	cd bench && $(GO) run . $(BENCH_ARGS)

## chaos: replicas of the real binary under kill -9, a PostgreSQL crash and a
## network cut, 20,000 jobs (make test runs the same suite with 1,200); see
## docs/reliability.md
CHAOS_JOBS ?= 20000
chaos: deps-postgres
	JEJAK_CHAOS_JOBS=$(CHAOS_JOBS) $(GO) test -count=1 -v -timeout 30m -run TestChaos ./internal/chaos/
