#!/usr/bin/env bash
# The core's constraints (docs/design.md §1, "The shape"), each a command:
#  1. no async runtime, HTTP client or socket library in its dependency tree;
#  2. it builds for wasm32-unknown-unknown with every feature;
#  3. no clock read and no ambient randomness in its source;
#  4. its layers are true: no import cycle in any crate of the workspace
#     and no import that runs up lease-core's layer table (lib.rs), read
#     from every `use` and inline `crate::` path (tests/src/layers.rs).
# The simulator (lease-sim, which the browser demo runs) is held to 2 and 3
# as well: a run must replay from its seed alone.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "check-core: dependency tree"
if cargo tree -p lease-core -e normal --all-features | grep -E '\b(tokio|hyper|reqwest|mio)\b'; then
  echo "check-core: FAIL: lease-core depends on a runtime or HTTP client (above)" >&2
  exit 1
fi

echo "check-core: wasm32 build"
cargo build -p lease-core --target wasm32-unknown-unknown --all-features --quiet
cargo build -p lease-sim --target wasm32-unknown-unknown --all-features --quiet

echo "check-core: no clock reads or ambient randomness"
if grep -rnE 'SystemTime::now|Instant::now|thread_rng|rand::|getrandom|Date::now' lease-core/src sim/src; then
  echo "check-core: FAIL: the core and the simulator must take time and randomness as inputs (above)" >&2
  exit 1
fi
echo "check-core: layers"
# --workspace --all-features: the build `make test` made (`-p lease-tests`
# alone would build the whole graph again with other features).
cargo test --workspace --all-features --test layers --quiet
echo "check-core: ok"
