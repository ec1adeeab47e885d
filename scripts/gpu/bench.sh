#!/usr/bin/env bash
# The benchmark comparisons against the real NVML and the real nvidia-smi, on a host with an
# NVIDIA GPU and driver. Prints criterion's results; record them in BENCHMARKS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# The run's date and machine, for scripts/bench/report.py.
echo "# date: $(date -u +%Y-%m-%d)"
echo "# machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%d GiB RAM", $2 / 1048576}' /proc/meminfo), Linux $(uname -r)"
echo "# driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.reserved --format=csv
if [ -n "${BENCH_BIN:-}" ]; then  # a prebuilt `cargo bench --no-run` binary
  HMN_BENCH_REAL=1 "$BENCH_BIN" --bench --warm-up-time 1 --measurement-time "${BENCH_TIME:-3}" 2>&1 \
    | grep -E '^(rss|device_info|snapshot|gpu_processes|process)/|time:'
else
  HMN_BENCH_REAL=1 cargo bench -p hypomnesis-cli --bench measure -- --warm-up-time 1 --measurement-time "${BENCH_TIME:-3}" 2>&1 \
    | grep -E '^(rss|device_info|snapshot|gpu_processes|process)/|time:'
fi
