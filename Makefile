# Nomos: every target installs or builds what it needs.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# -count=1: the tests talk to real services, so a cached pass proves nothing.
GO_TEST_FLAGS ?= -count=1 -timeout 30m
FUZZTIME ?= 10s
# Pure-Go end-to-end encryption (goolm): no libolm, no cgo needed.
export GOFLAGS := -buildvcs=false -tags=goolm
export CGO_ENABLED ?= 0
# The development build adds `nomos dev` and `nomos labsim`; the production
# build (make build, the Dockerfile) links neither labsim nor the dev stack
# (docs/architecture.md, "The development build"). A -tags flag replaces
# the one in GOFLAGS, so goolm is repeated.
DEV_TAGS := -tags=goolm,nomosdev

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# What `nomos version` prints: git describe of this checkout (the nearest
# tag, commits since and -dirty; the short commit when there is no tag), or
# dev outside git. Both may be given: make build VERSION=v0.3.0.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN ?= bin/nomos

.PHONY: build
build: ## build bin/nomos, the production build, stamped with the version and commit
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/nomos

.PHONY: build/dev
build/dev: ## build bin/nomos as the development build: every role, plus dev and labsim
	$(GO) build $(DEV_TAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/nomos

.PHONY: demo
demo: build/dev ## bring up the whole local stack (Postgres, Redis, Dendrite, labsim, roles)
	./bin/nomos dev

# sudo only when not root, as nomos dev -prepare does for its packages.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo -n)

.PHONY: prepare
prepare: ## start or install Postgres, Redis and Chromium, build Dendrite once into the cache, install systemd-analyze
	$(GO) run $(DEV_TAGS) ./cmd/nomos dev -prepare
	@# systemd-analyze verifies deploy/systemd/; it works on unit files offline,
	@# with no systemd running.
	@command -v systemd-analyze >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd; \
	} || { echo "make prepare: could not install systemd, which TestSystemdAnalyze needs"; exit 1; }
	@# The matrix-js-sdk client that TestIdentityResetVerifiedByEmoji drives
	@# (bot/testdata/sasclient), from its lockfile; the test skips without node.
	@if command -v npm >/dev/null; then cd bot/testdata/sasclient && npm ci --no-audit --no-fund --prefer-offline --loglevel=error; fi

.PHONY: test
test: prepare ## vet, then run the whole test suite against real services
	$(GO) vet ./...
	$(GO) vet $(DEV_TAGS) ./cmd/nomos/
	$(GO) test $(DEV_TAGS) $(GO_TEST_FLAGS) ./...
	# The packages that drive labsim over SSH again, with every simulated
	# host enforcing nomos gate as a node whose authorized_keys forces it.
	NOMOS_TEST_GATE=1 $(GO) test $(GO_TEST_FLAGS) ./actuator/ ./executions/ ./mcpserver/
	# A short run of the fuzz target that builds dangerous commands from a
	# grammar and checks that none classifies read_only.
	$(GO) test -run '^$$' -fuzz FuzzClassifyDangerous -fuzztime $(FUZZTIME) ./policy/

.PHONY: soak
soak: prepare ## the fault suite at full counts (about an hour); writes docs/reliability.md
	NOMOS_SOAK=1 $(GO) test -count=1 -timeout 3h -run '^TestFaults$$' ./internal/soak/
	@cat docs/reliability.md

.PHONY: test/short
test/short: ## the fast half of the tests: everything but what needs the homeserver, a browser or the built binary
	@# The short tests wait on Postgres and SSH far more than they compute:
	@# more packages at once than cores fills the waits.
	$(GO) test $(DEV_TAGS) -short -count=1 -p 8 ./...

.PHONY: test/race
test/race: prepare ## the test suite with the race detector (needs cgo)
	CGO_ENABLED=1 $(GO) test -race $(DEV_TAGS) $(GO_TEST_FLAGS) ./...

.PHONY: lint
lint: ## gofmt, vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet $(DEV_TAGS) ./cmd/nomos/
	$(GO) run $(STATICCHECK) ./...
	GOFLAGS='-buildvcs=false $(DEV_TAGS)' $(GO) run $(STATICCHECK) ./cmd/nomos/

.PHONY: bench
bench: prepare ## benchmarks (speed and memory are measured here, never in tests)
	$(GO) test $(DEV_TAGS) -run '^$$' -bench '^Benchmark([^ES]|E[^2]|S[^c])' -benchmem -count 5 ./...
	$(GO) test -run '^$$' -bench 'E2E' -benchtime 200x -count 1 ./executions/ ./bot/
	$(GO) test $(DEV_TAGS) -run '^$$' -bench '^BenchmarkScale' -benchtime 1x -count 1 ./executions/ ./cmd/nomos/

.PHONY: screenshots
screenshots: prepare ## write the status page's screenshots (1280 and 390 px) to docs/img
	mkdir -p docs/img
	NOMOS_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run '^TestScreenshots$$' ./web/

.PHONY: generate
generate: ## run go generate
	$(GO) generate ./...

.PHONY: verify
verify: generate ## fail when go mod tidy, gofmt or generated code would change anything
	$(GO) mod tidy
	gofmt -w $$(git ls-files '*.go')
	@git diff --exit-code -- . || (echo "verify: the tree changed; commit the result"; exit 1)
