#!/usr/bin/env bash
# Runs every fuzz target for SECONDS seconds each (default 60).
#
#   fuzz/run.sh            long runs (make fuzz)
#   fuzz/run.sh 5          a few seconds each (make test)
#   fuzz/run.sh 30 frame_decode   one target
#
# Works on the stable toolchain: it builds with libfuzzer-sys and the same
# coverage flags cargo-fuzz passes (`-Cpasses=sancov-module ...`, no
# sanitizer), so neither nightly nor the cargo-fuzz binary is needed.
# Every target first replays its saved regression inputs
# (fuzz/regressions/<target>/: crashing inputs found earlier, kept as
# regression tests; committed), then fuzzes from its corpus
# (fuzz/corpus/<target>/, not committed). A crash leaves the input in
# fuzz/artifacts/<target>/ and fails the script; copy it into
# fuzz/regressions/<target>/ once the bug is fixed.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(frame_decode data_file_recovery sparse_index key_index)
fi
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
cargo build --release --quiet --target "$TRIPLE" --target-dir target --bins
status=0
for t in "${TARGETS[@]}"; do
  bin="target/$TRIPLE/release/$t"
  mkdir -p "corpus/$t" "artifacts/$t" "regressions/$t"
  # Replay the kept regression inputs (a directory of files) first.
  if [ -n "$(ls -A "regressions/$t")" ]; then
    "$bin" -runs=0 "regressions/$t" >/dev/null 2>"artifacts/$t/replay.log" || {
      echo "fuzz $t: a regression input fails again:"; tail -30 "artifacts/$t/replay.log"; status=1; continue; }
  fi
  log="artifacts/$t/fuzz.log"
  if "$bin" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=2048 \
      -artifact_prefix="artifacts/$t/" "corpus/$t" "regressions/$t" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz $t: ${SECONDS_EACH}s, ${execs:-?} execs, ${cov:-cov: ?}, no crash"
  else
    echo "fuzz $t: CRASH (input saved in fuzz/artifacts/$t/):"
    grep -E "panicked|ERROR|SUMMARY" "$log" | head -10
    status=1
  fi
done
exit $status
