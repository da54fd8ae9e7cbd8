# ironflow: `make run` starts the whole service on embedded defaults,
# `make test` runs every test. Both install what they need: pinned Go tools
# under ./bin, Debian packages through scripts/install-deps.sh, data under
# ./.data.

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
DATA := $(CURDIR)/.data
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(BIN)/temporal
IRONFLOW := $(BIN)/ironflow
AGENT := $(BIN)/ironflow-agent
AGENT_ARM64 := $(BIN)/ironflow-agent.arm64
# The Temporal server (all four services) and its SQL schema tool, built
# from go.temporal.io/server at the version pinned in tools/temporal-server
# (its own module; docs/production.md).
TEMPORAL_SERVER := $(BIN)/temporal-server
TEMPORAL_SQL_TOOL := $(BIN)/temporal-sql-tool
TEMPORAL_UI := $(BIN)/temporal-ui-server
# Go test flags; TEST_TIMEOUT bounds each test binary, the VM tests'
# (tests/e2e, the longest) included. 70m: on a slow day of the 2-core CI
# machine the VM tests took about 50 minutes (docs/contributing.md, "How
# long make test takes"), and a timeout kill reports no test's result.
TEST_TIMEOUT ?= 70m
# Executions per fuzz target in make test: a count, not a duration, because
# a duration can end while a fuzz worker is busy and fail with "context
# deadline exceeded" on a loaded machine.
FUZZTIME ?= 3000x
# The order and number of test binaries at once. The VM tests (tests/e2e)
# take longest, and the integration tests (tests/) and apiserver's next:
# they start first, each in a slot of its own, and the other packages
# share a third slot, so that the longest package is not left to start
# after the short ones (go test runs the packages in the order given).
TEST_FIRST := ./tests/e2e/ ./tests/ ./apiserver/
TEST_P ?= 3

export IRONFLOW_TEMPORAL_BIN := $(TEMPORAL)
export IRONFLOW_BIN := $(IRONFLOW)
export IRONFLOW_AGENT_BIN := $(AGENT)
export IRONFLOW_TEMPORAL_SERVER_BIN := $(TEMPORAL_SERVER)
export IRONFLOW_TEMPORAL_SQL_TOOL_BIN := $(TEMPORAL_SQL_TOOL)
export IRONFLOW_TEMPORAL_UI_BIN := $(TEMPORAL_UI)
export IRONFLOW_IMAGES_DIR := $(DATA)/images

.PHONY: all build tools deps deps-run deps-bench run run-cluster test test-metal3 bench-compare bench-fleet test-unit fuzz fuzz-targets bench soak ramdisk ramdisk-arm64 kernel lint clean help record-histories docs

all: build

help:
	@echo "make run      start ironflow on embedded defaults (PostgreSQL, Temporal + Web UI, API, worker, PXE)"
	@echo "make run-cluster  make run on a Temporal cluster (PostgreSQL, mTLS) instead of the dev server"
	@echo "make test     run every test (unit, integration, baremetal CLI, VM end-to-end)"
	@echo "make bench    run the benchmarks and print their tables"
	@echo "make bench-fleet  10,000 fake nodes enrolled, managed, provided on ironflow dev and Ironic; reads and idle CPU at that size (about 40 min)"
	@echo "make bench-compare BASE=<commit>  this build's deploy rate and CPU per deploy against another commit's, one run"
	@echo "make fuzz     run every fuzz target longer (FUZZTIME=$(FUZZTIME))"
	@echo "make soak     deploy SOAK_NODES=$(SOAK_NODES) fake nodes with faults and crashes (not in make test)"
	@echo "make ramdisk  build the agent kernel + initramfs into .data/images"
	@echo "make ramdisk-arm64  the arm64 agent and loaders into .data/images (agent.kernel.aarch64 ...)"
	@echo "make record-histories  record this version's workflow histories (docs/versioning.md)"
	@echo "make docs     regenerate docs/configuration.md's flag table from the commands' flags"

go-check:
	@command -v $(GO) >/dev/null || { echo "ironflow needs Go 1.26 or newer (https://go.dev/dl/)"; exit 1; }

$(TEMPORAL): | go-check
	@mkdir -p $(BIN)
	@echo "installing the Temporal CLI $(TEMPORAL_CLI_VERSION) into ./bin (about a minute the first time)"
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# About three minutes on two cores the first time; rebuilt only when the
# pin (tools/temporal-server/go.mod) changes.
$(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL) &: tools/temporal-server/go.mod tools/temporal-server/go.sum | go-check
	@mkdir -p $(BIN)
	@echo "building the Temporal server and SQL tool (go.temporal.io/server, tools/temporal-server) into ./bin"
	cd tools/temporal-server && $(GO) build -o $(TEMPORAL_SERVER) go.temporal.io/server/cmd/server
	cd tools/temporal-server && $(GO) build -o $(TEMPORAL_SQL_TOOL) go.temporal.io/server/cmd/tools/sql

# The Web UI server of the cluster, the version the pinned CLI embeds.
$(TEMPORAL_UI): tools/temporal-ui/go.mod tools/temporal-ui/go.sum | go-check
	@mkdir -p $(BIN)
	cd tools/temporal-ui && $(GO) build -o $(TEMPORAL_UI) github.com/temporalio/ui-server/v2/cmd/server

tools: $(TEMPORAL) $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL) $(TEMPORAL_UI)

deps-run:
	@scripts/install-deps.sh run

deps:
	@scripts/install-deps.sh test

# The commit `ironflow version` prints beside the release of VERSION.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

build: go-check
	@mkdir -p $(BIN)
	$(GO) build -ldflags "-X github.com/ironflow/ironflow.commit=$(COMMIT)" -o $(IRONFLOW) ./cmd/ironflow
	CGO_ENABLED=0 $(GO) build -trimpath -o $(AGENT) ./cmd/ironflow-agent

kernel:
	@scripts/fetch-kernel.sh

# The agent ramdisk: Debian's kernel and an initramfs with the static agent
# as /init, cached under .data/images (agent.kernel, agent.initramfs).
ramdisk: build kernel
	$(GO) run ./agent/ramdisk/cmd/mkramdisk -agent $(AGENT) -kernel $(DATA)/kernel -out $(DATA)/ramdisk $(if $(AGENT_CUSTOM_STEPS),-custom-steps $(AGENT_CUSTOM_STEPS))
	@mkdir -p $(DATA)/images
	@ln -f $(DATA)/ramdisk/vmlinuz $(DATA)/images/agent.kernel
	@ln -f $(DATA)/ramdisk/initramfs.cpio.gz $(DATA)/images/agent.initramfs

# The arm64 agent (docs/bmcs-and-boot.md, "arm64"): the agent
# cross-compiled, Debian's arm64 kernel and its modules, and the loaders
# the boot service offers arm64 UEFI machines (Debian's signed network GRUB
# and shim), fetched by scripts/fetch-kernel.sh into .data/kernel.arm64;
# the x86-64 agent's files stay as they are.
ramdisk-arm64: go-check
	@KERNEL_ARCH=arm64 scripts/fetch-kernel.sh
	@mkdir -p $(BIN)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build -trimpath -o $(AGENT_ARM64) ./cmd/ironflow-agent
	$(GO) run ./agent/ramdisk/cmd/mkramdisk -agent $(AGENT_ARM64) -kernel $(DATA)/kernel.arm64 -out $(DATA)/ramdisk.arm64 -grub '' -systemd-boot - -mdadm -
	@mkdir -p $(DATA)/images
	@ln -f $(DATA)/ramdisk.arm64/vmlinuz $(DATA)/images/agent.kernel.aarch64
	@ln -f $(DATA)/ramdisk.arm64/initramfs.cpio.gz $(DATA)/images/agent.initramfs.aarch64
	@ln -f $(DATA)/kernel.arm64/boot/grubaa64.efi $(DATA)/images/grubaa64.efi
	@ln -f $(DATA)/kernel.arm64/boot/shimaa64.efi $(DATA)/images/shimaa64.efi

run: deps-run $(TEMPORAL) build
	@$(MAKE) --no-print-directory ramdisk || echo "make run: the agent ramdisk could not be built; fake-hardware nodes work without it"
	$(IRONFLOW) dev --data-dir $(DATA)

# make run on the Temporal server built from go.temporal.io/server:
# PostgreSQL persistence and visibility, mTLS on its frontend.
run-cluster: deps-run tools build
	@$(MAKE) --no-print-directory ramdisk || echo "make run-cluster: the agent ramdisk could not be built; fake-hardware nodes work without it"
	$(IRONFLOW) dev --data-dir $(DATA) --temporal cluster

test: deps tools build ramdisk ramdisk-arm64
	$(GO) vet ./...
	@mkdir -p $(DATA)
	@# The Metal3 module (one QEMU VM for most of its time) runs beside the
	@# root's packages: it fills the cores the long VM package leaves idle.
	@( $(MAKE) --no-print-directory test-metal3 > $(DATA)/test-metal3.log 2>&1; echo $$? > $(DATA)/test-metal3.rc ) & \
	set -o pipefail; $(GO) test -json -p $(TEST_P) -timeout $(TEST_TIMEOUT) -count=1 $(TEST_FIRST) ./... | tee $(DATA)/test.json | $(GO) run ./internal/slowest; \
	rc=$$?; wait; echo "== make test-metal3 (tests/metal3, run beside the packages above)"; cat $(DATA)/test-metal3.log; \
	[ $$rc -eq 0 ] && [ "$$(cat $(DATA)/test-metal3.rc)" = 0 ]
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME)

# The Metal3 proof (docs/metal3.md) is a module of its own, which the
# root's ./... skips: BMO's gophercloud pin stays out of ironflow's go.mod.
test-metal3: go-check
	cd tests/metal3 && $(GO) vet ./... && $(GO) -C simmachine vet . && $(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./...

test-unit: go-check
	$(GO) test -short -timeout $(TEST_TIMEOUT) -count=1 ./...

# Every Go fuzz target, each for FUZZTIME, on one PostgreSQL cluster
# (internal/withpostgres): a fuzz target runs in a coordinator and a worker
# per core, each a process that would otherwise start a cluster of its own
# for its database (storetest). One go list names every package's
# directory.
fuzz: go-check
	@$(GO) run ./internal/withpostgres $(MAKE) --no-print-directory fuzz-targets FUZZTIME=$(FUZZTIME)

fuzz-targets: go-check
	@set -e; for entry in $$($(GO) list -f '{{.ImportPath}}={{.Dir}}' ./...); do \
		pkg=$${entry%%=*}; dir=$${entry#*=}; \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Go benchmarks once each, then the scale benchmark: one markdown table of
# ironflow's figures against baselines measured in the same run, also
# written as JSON. BENCH_FLAGS picks parts and sizes (go run ./internal/bench -h).
BENCH_FLAGS ?=
deps-bench:
	@scripts/install-deps.sh bench

bench: deps-bench tools build ramdisk
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...
	$(GO) run ./internal/bench -out $(DATA)/bench/results.json $(BENCH_FLAGS)

# The fleet part alone (docs/benchmarks.md, "The 10,000-node fleet"; not in
# make bench, about 40 minutes on 2 cores): -fleet-nodes (default 10,000)
# fake-hardware nodes through enroll, manage and provide on ironflow dev
# and on Ironic, list and show at that size, the idle fleet's CPU.
bench-fleet: deps-bench $(TEMPORAL) build
	$(GO) run ./internal/bench -parts fleet -ironflow $(BIN)/ironflow -out $(DATA)/bench/fleet.json $(BENCH_FLAGS)

# This build against another commit's in one run (docs/benchmarks.md,
# "Comparing two builds"): BASE's ironflow is built from a clean export of
# that commit into .data/bench/base-<commit> (the sources removed after),
# then the compare part deploys
# with either build in turn on one stack.
BASE ?= v0.1.0
bench-compare: tools build
	@test -n "$(BASE)" || { echo "make bench-compare: set BASE=<commit or tag>"; exit 2; }
	@base=$$(git rev-parse --short "$(BASE)^{commit}") || { echo "make bench-compare: $(BASE) is not a commit of this clone"; exit 2; }; \
	dir=$(DATA)/bench/base-$$base; \
	if [ ! -x $$dir/ironflow ]; then \
		rm -rf $$dir/src && mkdir -p $$dir/src && git archive $$base | tar -x -C $$dir/src && \
		(cd $$dir/src && $(GO) build -o ../ironflow ./cmd/ironflow) || exit 1; \
		rm -rf $$dir/src; \
	fi; \
	$(GO) run ./internal/bench -parts compare -compare-ironflow $$dir/ironflow -ironflow $(BIN)/ironflow -out $(DATA)/bench/compare.json $(BENCH_FLAGS)

# The workflow histories of this release, replayed by every later build's
# go test until the next release (docs/versioning.md): the only directory
# of workflows/testdata/history, named for VERSION.
record-histories: $(TEMPORAL)
	rm -rf workflows/testdata/history && $(GO) run ./internal/record-histories workflows/testdata/history/$$(cat VERSION)

# The soak (docs/benchmarks.md, "Soak"; not part of make test): SOAK_NODES
# fake-hardware nodes deployed at once with BMC and agent faults while the
# worker, the API and Temporal are killed; every node must end active or
# failed with a last_error.
SOAK_NODES ?= 2000
soak: deps $(TEMPORAL) build
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 150m ./tests/ -soak.nodes $(SOAK_NODES)

# docs/configuration.md's flag table, generated from the FlagSets the
# commands build; TestConfigurationDocIsCurrent fails while it is stale.
docs: go-check
	$(GO) test ./cmd/ironflow -run '^TestConfigurationDocIsCurrent$$' -count=1 -args -update-docs

lint: go-check
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

clean:
	rm -rf $(BIN)/ironflow $(BIN)/ironflow-agent
