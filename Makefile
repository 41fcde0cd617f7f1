# Nomos: every target installs or builds what it needs.
SHELL := /bin/bash
GO ?= go
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

# make release VERSION=x.y.z: everything an operator installs, in $(DIST):
# the production binary for each of RELEASE_ARCHES, the nomos and
# nomos-gate .deb packages (nfpm), a CycloneDX SBOM of each binary (the
# modules it was linked from, read from the binary itself) and SHA256SUMS. Reproducible: -trimpath, no build id, and every timestamp is
# the commit's (SOURCE_DATE_EPOCH), so two builds of one commit give the
# same SHA256SUMS. Offline once the module cache holds both modules'
# dependencies (go mod download, and the same in deploy/tools); nfpm and
# cyclonedx-gomod are pinned as tools in deploy/tools/go.mod (go tool).
DIST ?= dist
RELEASE_ARCHES ?= amd64 arm64
RELEASE_STAGE := $(DIST)/.stage
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: release
release: ## make release VERSION=x.y.z: binaries, .deb packages, SBOM and SHA256SUMS in dist/
	@[[ "$(origin VERSION)" == "command line" && "$(VERSION)" =~ ^[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "make release: give VERSION=x.y.z (got $(VERSION))"; exit 2; }
	rm -rf $(DIST) && mkdir -p $(RELEASE_STAGE)
	$(GO) -C deploy/tools build -o $(abspath $(RELEASE_STAGE))/ \
	  github.com/goreleaser/nfpm/v2/cmd/nfpm github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
	@# The packages run the binary from /usr/bin; deploy/systemd documents
	@# /usr/local/bin for a hand install.
	for u in nomos-bot.service nomos-actuator.service; do \
	  sed 's|/usr/local/bin/nomos|/usr/bin/nomos|g' deploy/systemd/$$u > $(RELEASE_STAGE)/$$u || exit 1; \
	done
	set -e; for arch in $(RELEASE_ARCHES); do \
	  GOOS=linux GOARCH=$$arch $(GO) build -trimpath \
	    -ldflags "-s -w -buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT)" \
	    -o $(DIST)/nomos_$(VERSION)_linux_$$arch ./cmd/nomos; \
	  for pkg in nomos nomos-gate; do \
	    GOARCH=$$arch VERSION=$(VERSION) DIST=$(abspath $(DIST)) STAGE=$(abspath $(RELEASE_STAGE)) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	      $(RELEASE_STAGE)/nfpm package --config deploy/nfpm/$$pkg.yaml --packager deb \
	        --target $(abspath $(DIST))/$${pkg}_$(VERSION)_$$arch.deb >/dev/null; \
	  done; \
	  $(RELEASE_STAGE)/cyclonedx-gomod bin -json -std -noserial -notimestamp -version v$(VERSION) \
	    -output $(DIST)/nomos_$(VERSION)_linux_$$arch.cdx.json $(DIST)/nomos_$(VERSION)_linux_$$arch; \
	done
	rm -rf $(RELEASE_STAGE)
	cd $(DIST) && sha256sum -- * > SHA256SUMS && cat SHA256SUMS

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
	@# (bot/testdata/sasclient) and the MCP TypeScript SDK client that
	@# TestSDKClientValidatesEveryTool drives (mcpserver/testdata/sdkclient),
	@# each from its lockfile, on Node and npm (Debian's when the machine has
	@# none); the tests fail without them.
	@command -v npm >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; \
	} || { echo "make prepare: could not install Node and npm, which TestIdentityResetVerifiedByEmoji and TestSDKClientValidatesEveryTool need"; exit 1; }
	@cd bot/testdata/sasclient && npm ci --no-audit --no-fund --prefer-offline --loglevel=error
	@cd mcpserver/testdata/sdkclient && npm ci --no-audit --no-fund --prefer-offline --loglevel=error

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
soak: prepare ## the fault suite at full counts (10 to 15 minutes); writes docs/reliability.md
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

# golangci-lint v2, pinned in tools/golangci-lint/go.mod and built into
# bin/ from the module cache: offline once `go -C tools/golangci-lint mod
# download` has run, and rebuilt only when the pin changes. LINT_FLAGS
# adds flags, such as --concurrency 1 on a shared machine.
GOLANGCI_LINT := bin/golangci-lint
LINT_FLAGS ?=

$(GOLANGCI_LINT): tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	$(GO) -C tools/golangci-lint build -o $(abspath $@) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, then golangci-lint with .golangci.yml (vet, staticcheck, depguard, gosec, sloglint, …)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@# The development build (the tags in .golangci.yml) covers every
	@# package; the production build differs only in cmd/nomos.
	$(GOLANGCI_LINT) run $(LINT_FLAGS) ./...
	$(GOLANGCI_LINT) run $(LINT_FLAGS) --build-tags goolm ./cmd/nomos/

# Where make bench keeps the benchmarks' output for its summary.
BENCH_OUT ?= $(or $(TMPDIR),/tmp)/nomos-bench.txt

.PHONY: bench
bench: prepare ## benchmarks (speed and memory are measured here, never in tests), then a one-screen summary against the goals
	@set -o pipefail; { \
	  $(GO) test $(DEV_TAGS) -run '^$$' -bench '^Benchmark([^ELS]|E[^2]|S[^c])' -benchmem -count 5 ./... && \
	  $(GO) test -run '^$$' -bench 'E2E' -benchtime 200x -count 3 ./executions/ ./bot/ && \
	  $(GO) test -run '^$$' -bench '^BenchmarkLoad' -benchtime 1x -count 3 -timeout 60m ./executions/ && \
	  $(GO) test $(DEV_TAGS) -run '^$$' -bench '^BenchmarkScale' -benchtime 1x -count 1 ./executions/ ./cmd/nomos/; \
	} 2>&1 | tee $(BENCH_OUT)
	@$(GO) run ./internal/benchsummary < $(BENCH_OUT)

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
