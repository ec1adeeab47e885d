#!/usr/bin/env bash
# Runs the benchmark suite and writes BENCHMARKS.md: criterion benches (medians, ratios
# measured in one run) and process-level measurements of hmn run / watch / serve.
# Usage: scripts/bench.sh   (BENCH_TIME=seconds per benchmark, default 3; HMN_BEFORE=an older hmn
# binary, HMN_BEFORE_LABEL=its name, to compare `hmn ps` with 1,000 GPU processes)
#        scripts/bench.sh --only-ps   (that comparison alone, rewriting its section in place)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T="${BENCH_TIME:-3}"
if [ "${1:-}" = --only-ps ]; then
  fake="$CARGO_TARGET_DIR/fake-builds/modern"
  cargo build -q -p fake-nvml --target-dir "$fake"
  cp "$fake/debug/libnvidia_ml.so" "$fake/libnvidia-ml.so.1"
  cargo build -q --release --all-features --bin hmn
  exec python3 scripts/bench_report.py --only-ps
fi
cargo bench --bench measure -- --warm-up-time 1 --measurement-time "$T"
cargo bench --bench fdinfo_sweep -- --warm-up-time 1 --measurement-time "$T"
cargo bench --bench process_tree -- --warm-up-time 1 --measurement-time "$T"
cargo build --release --all-features --bin hmn
python3 scripts/bench_report.py > BENCHMARKS.md.new && mv BENCHMARKS.md.new BENCHMARKS.md
cat BENCHMARKS.md
