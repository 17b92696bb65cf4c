# The two commands of the README. `make test` installs what the tests need
# (only where missing) and runs every test; CI runs exactly this.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo

.PHONY: help test setup setup-moto setup-lambda setup-npm lint unit check-core bench demo

help:
	@echo "make test   install what the tests need (where missing), then run every test"
	@echo "make bench  run the lease-core benchmarks (criterion)"
	@echo "make demo   build and serve the browser demo"

## Installs only what is missing: safe to run on a fresh machine and again.
setup: setup-moto setup-lambda setup-npm
	@rustup target list --installed | grep -qx wasm32-unknown-unknown \
		|| rustup target add wasm32-unknown-unknown

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

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

unit:
	$(CARGO) test --workspace --all-features

check-core:
	./scripts/check-core.sh

test: setup lint unit check-core
	@echo "make test: all passed"

bench:
	$(CARGO) bench -p lease-core --all-features

demo:
	@echo "make demo: the browser demo (web/) is not built yet: it arrives with the web issue." >&2
	@exit 1
