#!/usr/bin/env bash
# Runs the benchmark suite and writes BENCHMARKS.md: criterion benches (medians, ratios
# measured in one run) and process-level measurements of hmn run / watch / serve.
# Usage: scripts/bench/bench.sh   (BENCH_TIME=seconds per benchmark, default 3; HMN_BEFORE=an older hmn
# binary, HMN_BEFORE_LABEL=its name, to compare `hmn ps` with 1,000 GPU processes)
#        scripts/bench/bench.sh --only-ps   (that comparison alone, rewriting its section in place)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
T="${BENCH_TIME:-3}"
if [ "${1:-}" = --only-ps ]; then
  fake_nvml >/dev/null
  cargo build -q --release --all-features --bin hmn
  exec python3 scripts/bench/report.py --only-ps
fi
fake_nvml >/dev/null
cargo bench -p hypomnesis-cli --bench measure -- --warm-up-time 1 --measurement-time "$T"
cargo bench -p hypomnesis --bench fdinfo_sweep -- --warm-up-time 1 --measurement-time "$T"
cargo bench -p hypomnesis --bench process_tree -- --warm-up-time 1 --measurement-time "$T"
cargo build --release --bin hmn
python3 scripts/bench/report.py > BENCHMARKS.md.new && mv BENCHMARKS.md.new BENCHMARKS.md
cat BENCHMARKS.md
