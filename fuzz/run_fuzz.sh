#!/usr/bin/env bash
# Short fuzz run of the checkpoint parsers (CI): builds fuzz/ with clang and
# -fsanitize=fuzzer,address,undefined, then runs each target for FUZZ_SECONDS (default 30) from a
# seed corpus. Exits non-zero on any crash, leak or sanitizer report (libFuzzer's own exit code).
# Usage: fuzz/run_fuzz.sh [BUILD_DIR]   (default build-fuzz in the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}
cxx=${CXX_FUZZ:-clang++}
command -v "$cxx" >/dev/null || { echo "run_fuzz: $cxx not found"; exit 1; }
cmake -S "$root/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DZS_FUZZ=ON >/dev/null
ninja -C "$build"
corpus=$build/corpus
rm -rf "$corpus"
"$build/make_fuzz_seeds" "$corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in manifest shard_header safetensors_header; do
  echo "== fuzz_$t for ${seconds}s"
  mkdir -p "$build/artifacts/$t"
  if ! "$build/fuzz_$t" "$corpus/$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" \
      2>"$build/fuzz_$t.log"; then
    echo "fuzz_$t FAILED (log: $build/fuzz_$t.log, inputs: $build/artifacts/$t/)"
    tail -40 "$build/fuzz_$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build/fuzz_$t.log" | tail -2
  fi
done
exit $status
