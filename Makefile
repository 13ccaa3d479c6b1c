# ax — run `make help` for the targets.

GO            ?= go
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
SWAG          ?= $(GO) run github.com/swaggo/swag/cmd/swag@v1.16.6
TEST_FLAGS    ?= -race -count=1 -timeout 20m
# A count (Nx), not a duration: Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as a failure (golang/go#75804, fixed in Go 1.27).
FUZZ_TIME     ?= 50000x
HELM_VERSION  ?= v3.22.0
# helm on PATH, else where `go install` puts it.
HELM          ?= $(or $(shell command -v helm 2>/dev/null),$(firstword $(shell $(GO) env GOBIN) $(shell $(GO) env GOPATH)/bin)/helm)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_\/-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run ax (embedded Postgres under ./.ax unless AX_DATABASE_URL is set).
	$(GO) run ./cmd/server

.PHONY: build
build: ## Build the ax binary into ./bin/ax.
	$(GO) build -o bin/ax ./cmd/server

.PHONY: test
test: ## Run every test (starts a throwaway Postgres; needs the postgresql package). With -race in TEST_FLAGS, tests/ runs ax built with -race too.
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZ_TIME inputs (e.g. FUZZ_TIME=200000x).
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZ_TIME); \
	  done; done

.PHONY: lint
lint: ## Run golangci-lint v2 (gofumpt included).
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

.PHONY: fmt
fmt: ## Format the code the house way (gofmt, gofumpt).
	$(GOLANGCI_LINT) fmt ./...

.PHONY: generate
generate: ## Regenerate openapi/ from the handlers' annotations.
	$(GO) generate ./...

.PHONY: ts-check
ts-check: ## Regenerate the TypeScript client's types (openapi/ts) and type-check it and its example with tsc --strict; skipped without Node.js.
	@if ! command -v npm >/dev/null 2>&1; then echo "ts-check: skipped, Node.js (npm) is not installed"; exit 0; fi; \
	cd openapi/ts && npm ci --no-audit --no-fund --loglevel=error && npm run --silent generate && npm run --silent check && echo "ts-check: ok"

REDOCLY_VERSION ?= 2.77.0

.PHONY: openapi-lint
openapi-lint: ## Lint openapi/openapi.json with Redocly's recommended rules (openapi/redocly.yaml), warnings included; skipped without Node.js.
	@if ! command -v npx >/dev/null 2>&1; then echo "openapi-lint: skipped, Node.js (npx) is not installed"; exit 0; fi; \
	out=$$(npx --yes @redocly/cli@$(REDOCLY_VERSION) lint --config openapi/redocly.yaml --format stylish 2>&1); status=$$?; \
	echo "$$out" | grep -E '^ +[0-9]+:[0-9]+ +(error|warning) '; \
	if [ $$status -ne 0 ] || echo "$$out" | grep -qE '^ +[0-9]+:[0-9]+ +warning '; then echo "openapi-lint: failed (see above)"; exit 1; fi; \
	echo "openapi-lint: ok"

.PHONY: verify
verify: generate ts-check openapi-lint ## Fail when generated files are stale or go.mod is untidy, or the spec is off.
	$(GO) mod tidy
	git diff --exit-code -- openapi go.mod go.sum
	$(GO) test -count=1 ./openapi/...

.PHONY: helm-check
helm-check: ## Lint and render the Helm chart with default and production values (builds helm v3 when missing).
	@test -x "$(HELM)" || { echo "building helm $(HELM_VERSION) (a few minutes, once)"; $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }
	$(HELM) lint --strict deploy/helm/ax
	$(HELM) lint --strict deploy/helm/ax -f deploy/helm/ax/values-production.yaml
	$(HELM) template ax deploy/helm/ax >/dev/null
	$(HELM) template ax deploy/helm/ax -f deploy/helm/ax/values-production.yaml >/dev/null

BENCH_FLAGS ?=

.PHONY: bench-precision
bench-precision: ## Firing lateness at 1,000 fires/s for 30 s, then a 10,000-task burst (tests/bench; BENCH_FLAGS adds flags).
	$(GO) run ./tests/bench -scenario precision,burst -duration 30s -json tmp/bench-precision.json $(BENCH_FLAGS)

.PHONY: bench-limits
bench-limits: ## Endpoint max_concurrency and rate_limit_per_second across 2 replicas (about 4 min; tests/bench; BENCH_FLAGS adds flags).
	$(GO) run ./tests/bench -scenario maxconc,ratelimit -json tmp/bench-limits.json $(BENCH_FLAGS)

.PHONY: bench-runner
bench-runner: ## ax runner: 200 deliveries at once running /bin/true; prints completions/s (about 10 s).
	$(GO) test ./cmd/server/runner -run '^$$' -bench ShortCommands -benchtime 20x

.PHONY: bench-apply
bench-apply: ## ax apply: 1,000 tasks to a fresh tenant, then the same files again (no change); prints seconds per apply (about 1 min).
	$(GO) test ./cmd/server -run '^$$' -bench Apply1000Tasks -benchtime 3x

.PHONY: bench
bench: ## Every benchmark scenario (about 17 min); prints a table and writes tmp/bench.json.
	$(GO) run ./tests/bench -scenario all -json tmp/bench.json $(BENCH_FLAGS)

SOAK_FLAGS ?=

.PHONY: soak
soak: ## Soak with faults: 3 replicas, kills, PostgreSQL restarts, a flaky receiver for 10 min, then a check (tests/soak; SOAK_FLAGS adds flags).
	$(GO) run ./tests/soak -duration 10m $(SOAK_FLAGS)
