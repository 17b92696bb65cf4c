# The two commands of the README. `make test` installs what the tests need
# (only where missing) and runs every test; CI runs exactly this.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo

.PHONY: help test setup lint unit check-core bench demo

help:
	@echo "make test   install what the tests need (where missing), then run every test"
	@echo "make bench  run the lease-core benchmarks (criterion)"
	@echo "make demo   build and serve the browser demo"

## Installs only what is missing: safe to run on a fresh machine and again.
setup:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown \
		|| rustup target add wasm32-unknown-unknown

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
