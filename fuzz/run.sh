#!/usr/bin/env bash
# Fuzzes each target in turn (`make fuzz`): FUZZ_SECONDS each from the kept
# corpus (fuzz/corpus/<target>) and the seeds (seed.py), no panic, no input
# slower than 10 s, at most 2 GB; then minimises the kept corpus
# (`cargo fuzz cmin`) and prints one line of figures per target (the
# coverage is the last status line's: `cov` edges, `ft` features). A crash
# stops the run; its input is in fuzz/artifacts/<target>/.
#
# usage: run.sh SECONDS TARGET...
set -euo pipefail
cd "$(dirname "$0")"

seconds=$1
shift
limits=(-rss_limit_mb=2048 -timeout=10)
logs=target/fuzz-logs
mkdir -p "$logs"
python3 seed.py

summary=()
for target in "$@"; do
  mkdir -p "corpus/$target"
  # Records up to the decoder's 8 KiB limit and past it; the other inputs
  # up to 2 KiB, which keeps the kept corpus small.
  max_len=2048
  [ "$target" = record ] && max_len=9000
  flags=("${limits[@]}" -max_len="$max_len")
  log="$logs/$target.log"
  echo "fuzz: $target for ${seconds}s (log: fuzz/$log)"
  start=$(date +%s)
  if ! nice -n 10 cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
      "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED; the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  took=$(($(date +%s) - start))
  # Kept: a smallest set of inputs that reaches every edge the corpus
  # reaches (greedy set cover, hit counts ignored), to keep the repository
  # small.
  nice -n 10 cargo +nightly fuzz cmin "$target" "corpus/$target" -- \
    "${flags[@]}" -set_cover_merge=1 -use_counters=0 >"$logs/$target.cmin.log" 2>&1
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  files=$(find "corpus/$target" -type f | wc -l)
  bytes=$(find "corpus/$target" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  line="$target: ${took}s, ${execs} execs, cov ${cov}, ft ${ft}, peak ${rss} MB, corpus ${files} files / ${bytes} bytes"
  echo "fuzz: $line"
  summary+=("$line")
done
echo "fuzz: all targets ran ${seconds}s with no crash:"
printf '  %s\n' "${summary[@]}"
