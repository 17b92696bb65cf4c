# The two commands of the README. `make test` installs what the tests need
# (only where missing) and runs every test; CI runs exactly this.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo

.PHONY: help test setup setup-moto setup-lambda setup-npm setup-wasm setup-browser setup-worker-build \
	lint unit test-mutants check-core test-wasm test-e2e bench bench-lambda bench-contention bench-shards bench-handoff demo demo-build worker-build sim-long chaos sizes \
	setup-fuzz fuzz qualify

help:
	@echo "make test   install what the tests need (where missing), then run every test"
	@echo "make bench  run the lease-core benchmarks (criterion)"
	@echo "make bench-lambda  size and cold start of the example Lambda against aws-sdk-s3"
	@echo "make bench-shards  a shard fleet of 50 members and 256 shards on serialised moto: the times to cover and balance after the start, a kill, a join and a leave"
	@echo "make bench-handoff  a planned handoff's unowned window against a resign's, ten of each on moto"
	@echo "make bench-contention  CONTENDERS (100) on one lease key against serialised moto: cas, epochs, mutex and a create/delete lock on aws-sdk-s3, BENCH_SECONDS (60) per configuration, HOLD_MS (200), BUSY_MS (100 1000), BENCH_CONFIGS (all; or e.g. \"cas-wait cas-fair epochs-wait epochs-fair\")"
	@echo "make demo   build and serve the browser demo"
	@echo "make worker-build  build the example Cloudflare Worker offline (cloudflare/example/build), and the conformance Worker of the tests"
	@echo "make test-mutants  the broken variants of lease-core (a test build with --cfg lease_mutants), each shown caught"
	@echo "make sim-long  the long simulation runs in release on fresh seeds (1,000,020 product schedules, 100,000 + 2 x 50,000 elector schedules, the large models; SIM_SEED_BASE=N replays a run)"
	@echo "make sizes     the code's own sizes: lines per crate, lease-core's public surface, files over 800 lines, functions of 80+ lines"
	@echo "make chaos  the fleet lab's long run: 22 processes and a shard fleet of 3 members splitting 8 shards, for 10 minutes against serialised moto (LAB_SECONDS, LAB_RUNNERS, LAB_SERVICES, LAB_FUNCTIONS, LAB_SHARD_MEMBERS, LAB_SHARDS, LAB_SEED, LAB_RATE)"
	@echo "make qualify  the probe and the concurrent races against every emulator the tests start: the dated rows of docs/protocols.md's provider table"
	@echo "make fuzz  fuzz every decoder of outside bytes, FUZZ_SECONDS (600) per target (nightly Rust, cargo-fuzz)"

## Installs only what is missing: safe to run on a fresh machine and again.
setup: setup-moto setup-lambda setup-npm setup-wasm setup-browser setup-worker-build

# The wasm target and the wasm-bindgen CLI (wasm-bindgen, and
# wasm-bindgen-test-runner for the browser tests), which must be the very
# version web/Cargo.toml pins. No --locked: its lockfile names a crate
# version the registry here does not have.
WASM_BINDGEN_VERSION := 0.2.130

setup-wasm:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown \
		|| rustup target add wasm32-unknown-unknown
	@if [ "$$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen $(WASM_BINDGEN_VERSION)" ] \
		&& command -v wasm-bindgen-test-runner >/dev/null; then \
		echo "setup: wasm-bindgen $(WASM_BINDGEN_VERSION) already installed"; \
	else \
		echo "setup: cargo install wasm-bindgen-cli $(WASM_BINDGEN_VERSION) (several minutes)"; \
		$(CARGO) install --quiet wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION); \
	fi

# worker-build, which turns the example Worker into build/index.js +
# build/index_bg.wasm. --locked: its own lockfile builds here.
WORKER_BUILD_VERSION := 0.8.7

setup-worker-build:
	@if [ "$$(worker-build --version 2>/dev/null)" = "$(WORKER_BUILD_VERSION)" ]; then \
		echo "setup: worker-build $(WORKER_BUILD_VERSION) already installed"; \
	else \
		echo "setup: cargo install worker-build $(WORKER_BUILD_VERSION) (several minutes)"; \
		$(CARGO) install --quiet --locked worker-build --version $(WORKER_BUILD_VERSION); \
	fi

# Debian's Chromium and its WebDriver, for the page's tests.
setup-browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "setup: chromium and chromedriver already installed"; \
	else \
		echo "setup: apt-get install chromium chromium-driver"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			$$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# moto (an S3 emulator the integration tests start, see tests/src/servers)
# in a venv at .venv. Skipped when .venv already has this exact version and
# moto_server's #! line still names this venv's python (a venv moved with
# its work tree breaks there); otherwise the venv is rebuilt from scratch.
MOTO_VERSION := 5.2.5
VENV := .venv

setup-moto:
	@if [ -x $(VENV)/bin/moto_server ] \
		&& [ "$$(sed -n '1s/^#!//p' $(VENV)/bin/moto_server)" -ef $(VENV)/bin/python ] \
		&& [ "$$($(VENV)/bin/python -c 'import importlib.metadata as m; print(m.version("moto"))' \
			2>/dev/null)" = "$(MOTO_VERSION)" ]; then \
		echo "setup: moto $(MOTO_VERSION) already in $(VENV)"; \
	else \
		echo "setup: installing moto[server]==$(MOTO_VERSION) into $(VENV)"; \
		python3 -c 'import ensurepip' 2>/dev/null \
			|| { apt-get update -qq && apt-get install -y -qq python3-venv; }; \
		python3 -m venv --clear $(VENV) \
			&& $(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'; \
	fi

# cargo-lambda (its Runtime API emulator, `cargo lambda watch`, runs the
# example function in the tests), from PyPI into the same venv: it ships
# its own binary and zig, and needs nothing at run time.
CARGO_LAMBDA_VERSION := 1.9.2

setup-lambda: setup-moto
	@if [ -x $(VENV)/bin/cargo-lambda ] \
		&& [ "$$($(VENV)/bin/python -c 'import importlib.metadata as m; print(m.version("cargo-lambda"))' \
			2>/dev/null)" = "$(CARGO_LAMBDA_VERSION)" ]; then \
		echo "setup: cargo-lambda $(CARGO_LAMBDA_VERSION) already in $(VENV)"; \
	else \
		echo "setup: installing cargo-lambda==$(CARGO_LAMBDA_VERSION) into $(VENV)"; \
		$(VENV)/bin/pip install --quiet --disable-pip-version-check 'cargo-lambda==$(CARGO_LAMBDA_VERSION)'; \
	fi

# npm tools pinned by tests/package.json + tests/package-lock.json (s3rver),
# installed with `npm ci` into tests/node_modules. npm writes
# node_modules/.package-lock.json at the end of an install: it is the stamp,
# and a newer package.json or lockfile (or a missing stamp) reinstalls.
NPM_STAMP := tests/node_modules/.package-lock.json

setup-npm:
	@if [ -f $(NPM_STAMP) ] && [ ! tests/package-lock.json -nt $(NPM_STAMP) ] \
		&& [ ! tests/package.json -nt $(NPM_STAMP) ]; then \
		echo "setup: tests/node_modules up to date"; \
	else \
		echo "setup: npm ci in tests/"; \
		cd tests && npm ci --no-audit --no-fund --loglevel=error; \
	fi

# The other clippies: lease-core as a product builds it (without the
# checkers' rules and the unsafe variants the simulator runs), and
# lease-lambda and lease-cli without their runtimes, as the fuzzer builds
# them.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(CARGO) clippy -p lease-core --lib --features sigv4,sharedkey,serde -- -D warnings
	$(CARGO) clippy -p lease-lambda --no-default-features --lib -- -D warnings
	$(CARGO) clippy -p lease-cli --no-default-features --lib -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --all-features

# tests/tests/cloudflare.rs and conformance.rs run the built Workers in workerd.
# Everything is built first (and the `lease` binary the CLI tests run); the
# CPU-bound tests (lease-core, the simulations) run alone; then the
# real-server binaries of lease-tests, which mostly wait on servers and
# wall-clock time, run in lanes side by side (real-lanes).
#
# Every step names `--workspace --all-features`, so all of them share one
# build: `-p lease-tests` alone would resolve lease-core's features apart
# and build the whole graph again (about 1 GB more in target/).
unit: worker-build
	$(CARGO) test --workspace --all-features --no-run
	$(CARGO) test --workspace --all-features --lib --bins --examples
	$(CARGO) test --workspace --all-features --exclude lease-tests --test '*'
	$(CARGO) test --workspace --all-features --doc
	$(MAKE) --no-print-directory real-lanes

# What the lanes' binaries build on first use, built before any lane runs:
# the `lease` binary, the example Lambda and the native example `leader`
# (otherwise one lane compiles while another's timed steps run). The lanes
# run `--workspace --all-features` with `--test` names: the workspace's
# build (`-p lease-tests` would resolve lease-core's features apart, a
# second build of everything).
REAL_PREBUILD = \
	$(CARGO) test --workspace --all-features --no-run && \
	$(CARGO) build -q -p lease-cli --bin lease && \
	$(CARGO) build -q --locked -p lease-lambda --bin scheduled-singleton && \
	$(CARGO) build -q -p lease-native --example leader

# lease-tests' binaries (tests/tests/*.rs) in three lanes run side by side,
# each lane's binaries one after another and its output printed whole when
# it ends (--output-sync); a warm `make test` spends about 12 minutes here
# one binary at a time, about 5 in lanes. Lanes 1 and 2 are named; lane 3
# is every other file, so a new test file runs without being listed. The
# lab runs its own parts one at a time (tests/tests/lab.rs).
REAL_TESTS := $(basename $(notdir $(wildcard tests/tests/*.rs)))
REAL_LANE_1 := lab lambda leadership gcs_oauth ops servers
REAL_LANE_2 := conformance credentials cloudflare protocols_real
REAL_LANE_3 := $(filter-out $(REAL_LANE_1) $(REAL_LANE_2),$(REAL_TESTS))

.PHONY: real-lanes real-lane-1 real-lane-2 real-lane-3
real-lanes:
	$(REAL_PREBUILD)
	$(MAKE) --no-print-directory -j3 --output-sync=target real-lane-1 real-lane-2 real-lane-3

real-lane-1 real-lane-2 real-lane-3: real-lane-%:
	$(if $(REAL_LANE_$*),$(CARGO) test --workspace --all-features $(addprefix --test ,$(REAL_LANE_$*)),@echo "real-lane-$*: no test files")

check-core:
	./scripts/check-core.sh

# The demo's exports compiled to wasm32, in headless Chromium.
test-wasm: setup-wasm setup-browser
	$(CARGO) test -p lease-web --target wasm32-unknown-unknown

# The page end to end: Playwright drives Debian's Chromium against the
# built demo served by the same server `make demo` uses; the screenshot
# lands in target/web-e2e/.
test-e2e: demo-build setup-browser
	node tests/web/e2e.mjs $(DEMO_DIR) target/web-e2e

# The example Worker, and the conformance Worker the tests run the store
# conformance lifecycle in (tests/tests/conformance.rs; never deployed),
# built offline: worker-build would download wasm-bindgen, binaryen and
# esbuild; it is pointed at the copies `make setup` installed instead. The
# size-tuned `wasm` profile.
WORKER_DIR := cloudflare/example
CONFORMANCE_WORKER_DIR := tests/cloudflare/conformance-worker
NPM_BIN := $(CURDIR)/tests/node_modules/.bin
WORKER_BUILD = WASM_BINDGEN_BIN="$$(command -v wasm-bindgen)" WASM_OPT_BIN=$(NPM_BIN)/wasm-opt \
	ESBUILD_BIN=$(NPM_BIN)/esbuild worker-build --profile wasm

worker-build: setup-wasm setup-npm setup-worker-build
	cd $(WORKER_DIR) && $(WORKER_BUILD)
	@echo "worker: index_bg.wasm $$(stat -c %s $(WORKER_DIR)/build/index_bg.wasm) bytes," \
		"$$(gzip -9 -c $(WORKER_DIR)/build/index_bg.wasm | wc -c) gzipped;" \
		"index.js $$(stat -c %s $(WORKER_DIR)/build/index.js) bytes," \
		"$$(gzip -9 -c $(WORKER_DIR)/build/index.js | wc -c) gzipped"
	cd $(CONFORMANCE_WORKER_DIR) && $(WORKER_BUILD)

test: setup lint unit test-mutants test-wasm test-e2e check-core
	@echo "make test: all passed"

# The broken variants of lease-core/src/mutants.rs (fixes undone), each
# caught by the simulation, a scenario (sim/tests/mutants.rs) or the model
# checker (lease-core/tests/model.rs, the tests named *_mutant_is_caught): a test
# build of its own (--cfg lease_mutants, in target/mutants so the main
# build is untouched).
test-mutants:
	RUSTFLAGS="--cfg lease_mutants" $(CARGO) test -p lease-sim --all-features \
		--target-dir target/mutants --test mutants
	RUSTFLAGS="--cfg lease_mutants" $(CARGO) test -p lease-core --all-features \
		--target-dir target/mutants --test model --test model_sessions -- _mutant_is_caught

# The long runs, in release: the product simulation over 1,000,020 random
# schedules (33,334 seeds x 30: 3 protocols x 9 client mixes, and the
# sessions', the shard fleets' and the simple clients' mixes under cas),
# the elector
# simulation over 100,000 (and 50,000 each of epochs and mutex), the large
# model checks. The random runs start at a fresh seed base every time,
# printed at the start and in a failure; SIM_SEED_BASE=N makes a run
# replay (sim/tests/support/mod.rs, SimSeeds).
SIM_LONG_SEEDS ?= 33334

sim-long:
	SIM_SEEDS=$(SIM_LONG_SEEDS) $(CARGO) test -p lease-sim --release --all-features --test sim_clients \
		random_schedules_are_safe -- --nocapture
	$(CARGO) test -p lease-sim --release --all-features --test sim -- --ignored --nocapture
	$(CARGO) test -p lease-core --release --all-features --test model -- --ignored --nocapture

bench:
	$(CARGO) bench -p lease-core --all-features

# The code's own sizes (lines per crate, lease-core's public surface, long
# files and functions): BENCHMARKS.md, "Sizes of the code".
sizes:
	$(CARGO) run -q -p lease-tests --bin sizes

# The example Lambda against two yardsticks kept outside the default build
# (lambda/bench: aws-sdk-s3, and reqwest + aws-sigv4), all with the
# size-tuned `lambda` profile; then size and cold start side by side.
# RUNS=N sets the number of interleaved runs (default 200).
BENCH_TARGET := target/bench-lambda
RUNS ?= 200

bench-lambda:
	$(CARGO) build --profile lambda -p lease-lambda --bin scheduled-singleton
	$(CARGO) build --release --manifest-path lambda/bench/sdk-baseline/Cargo.toml --target-dir $(BENCH_TARGET)
	$(CARGO) build --release --manifest-path lambda/bench/sigv4-baseline/Cargo.toml --target-dir $(BENCH_TARGET)
	python3 lambda/bench/coldstart.py --runs $(RUNS) \
		aws-sdk-s3=$(BENCH_TARGET)/release/sdk-baseline \
		reqwest+aws-sigv4=$(BENCH_TARGET)/release/sigv4-baseline \
		lease-lambda=target/lambda/scheduled-singleton

# N contenders on one lease key against serialised moto (one request at a
# time, as on a throttled S3 prefix): our protocols with a busy loop and
# with acquire_within, beside a create/delete lock on aws-sdk-s3
# (tests/bench/contention, its own workspace outside the default build).
# BENCH_SECONDS per configuration, 4 per busy wait in BUSY_MS plus 5 (or
# those BENCH_CONFIGS names); the table is printed and written to
# target/bench-contention/report.md.
CONTENTION_TARGET := target/bench-contention
CONTENDERS ?= 100
BENCH_SECONDS ?= 60
HOLD_MS ?= 200
BUSY_MS ?= 100 1000
# Which configurations: all, or names among baseline, <protocol>-busy,
# <protocol>-wait, cas-fair, epochs-fair (see the README).
BENCH_CONFIGS ?= all

# A shard fleet's moves timed on serialised moto: 50 members, 256 shards,
# ttl 6 s; a member killed, one joining, one leaving (BENCHMARKS.md,
# "Shard fleets").
bench-shards: setup-moto
	$(CARGO) test --workspace --all-features --test shards fifty_members -- --ignored --nocapture

# A planned handoff's unowned window against a resign's, on moto: ten of
# each, ttl 6 s (BENCHMARKS.md, "A planned handoff").
bench-handoff: setup-moto
	$(CARGO) test --workspace --all-features --test handoff the_unowned_window -- --ignored --nocapture

bench-contention: setup-moto
	$(CARGO) build --release --manifest-path tests/bench/contention/Cargo.toml --target-dir $(CONTENTION_TARGET)
	$(CONTENTION_TARGET)/release/bench-contention --contenders $(CONTENDERS) --seconds $(BENCH_SECONDS) \
		--hold-ms $(HOLD_MS) --busy-ms "$(BUSY_MS)" --configs "$(BENCH_CONFIGS)" --report $(CONTENTION_TARGET)/report.md

# The browser demo: the core compiled to wasm32 with the size-tuned `wasm`
# profile, bound with wasm-bindgen, shrunk with wasm-opt (npm binaryen;
# Debian's is too old), beside the static page, in target/demo.
DEMO_DIR := target/demo
DEMO_PORT ?= 8000
WASM_OPT := tests/node_modules/.bin/wasm-opt
# The features rustc enables by default for wasm32-unknown-unknown (the
# `wasm` profile strips the section that would tell wasm-opt).
WASM_FEATURES := --enable-bulk-memory --enable-multivalue --enable-mutable-globals \
	--enable-nontrapping-float-to-int --enable-reference-types --enable-sign-ext

# -Oz until it stops shrinking; --low-memory-unused lets wasm-opt fold
# constant offsets into addresses, which holds for Rust's wasm32 layout:
# the stack grows down from 1 MB toward 0 and the data sits above it, so the
# low 1 KB is reached only by a stack already overflowed (about 0.8 KB gz
# of the demo's module). --monomorphize first: copies of functions called
# with constant arguments, specialised (about 1.2 KB gz of the demo's
# module; the Worker runs the same passes, cloudflare/example/Cargo.toml).
# The producers and target-features sections go (about 0.15 KB gz): no
# browser reads them. --merge-similar-functions before -Oz folds functions
# that differ only in constants into one taking them as arguments (about
# 0.5 KB gz of the demo's module).
DEMO_WASM_OPT := --monomorphize --merge-similar-functions -Oz --converge --low-memory-unused --strip-producers --strip-target-features

demo-build: setup-wasm setup-npm
	$(CARGO) build --profile wasm --target wasm32-unknown-unknown -p lease-web -p lease-web-jobs
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	for m in lease_web lease_web_jobs; do \
		wasm-bindgen --target web --no-typescript --out-dir $(DEMO_DIR)/pkg \
			target/wasm32-unknown-unknown/wasm/$$m.wasm && \
		$(WASM_OPT) $(DEMO_WASM_OPT) $(WASM_FEATURES) $(DEMO_DIR)/pkg/$${m}_bg.wasm -o $(DEMO_DIR)/pkg/$${m}_bg.wasm || exit 1; \
	done
	cp web/www/* $(DEMO_DIR)/
	@echo "demo: $$(stat -c %s $(DEMO_DIR)/pkg/lease_web_bg.wasm) bytes of wasm," \
		"$$(gzip -9 -c $(DEMO_DIR)/pkg/lease_web_bg.wasm | wc -c) gzipped;" \
		"the scheduled-job view, loaded when opened: $$(stat -c %s $(DEMO_DIR)/pkg/lease_web_jobs_bg.wasm) bytes," \
		"$$(gzip -9 -c $(DEMO_DIR)/pkg/lease_web_jobs_bg.wasm | wc -c) gzipped"

demo: demo-build
	@echo "demo: serving $(DEMO_DIR) at http://127.0.0.1:$(DEMO_PORT)/ (Ctrl-C stops it; DEMO_PORT=N for another port)"
	@exec python3 -m http.server --bind 127.0.0.1 --directory $(DEMO_DIR) $(DEMO_PORT)

# The fleet lab's long run (tests/tests/lab.rs `chaos_long`): 14 `lease
# run` slots, 4 services and 4 Lambda functions, and a shard fleet of 3
# `lab-shard` members splitting 8 shards (LAB_SHARD_MEMBERS, LAB_SHARDS),
# against serialised moto behind the fault proxy, every fault kind, 10
# minutes unless LAB_SECONDS says otherwise. The summary is printed; a
# failing run keeps its logs under target/lab/.
chaos: setup-moto setup-npm
	$(CARGO) test -p lease-tests --test lab chaos_long -- --ignored --nocapture

# The emulator rows of docs/protocols.md's dated provider table: the probe
# and the concurrent races (16 racers, 10 rounds) against each server the
# tests start, one Markdown row each, dated (tests/tests/qualify.rs).
qualify: setup-moto setup-npm
	$(CARGO) test -p lease-tests --test qualify -- --ignored --nocapture

# Coverage-guided fuzzing of every decoder of outside bytes (fuzz/, see the
# docs/verification.md, "Hostile input"): FUZZ_SECONDS per target, one at a time, then
# the kept corpus minimised. Long, and on nightly Rust: not part of `make
# test`, which replays the kept corpus on stable (tests/tests/fuzz_corpus.rs).
# FUZZ_TARGETS=record make fuzz runs one target.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= record s3_reply gcs_reply azure_reply listing http_dates etag settings_env cli_flags lease_ops
CARGO_FUZZ_VERSION := 0.13.2

setup-fuzz:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@if [ "$$(cargo fuzz --version 2>/dev/null)" = "cargo-fuzz $(CARGO_FUZZ_VERSION)" ]; then \
		echo "setup: cargo-fuzz $(CARGO_FUZZ_VERSION) already installed"; \
	else \
		echo "setup: cargo install cargo-fuzz $(CARGO_FUZZ_VERSION)"; \
		$(CARGO) install --quiet --locked cargo-fuzz --version $(CARGO_FUZZ_VERSION); \
	fi

fuzz: setup-fuzz
	./fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)
