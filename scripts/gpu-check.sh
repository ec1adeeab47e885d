#!/usr/bin/env bash
# Live checks on a host with an NVIDIA GPU: builds, runs the #[ignore]d live tests, and prints
# what hmn-the-library and nvidia-smi each see, for the record. Usage: scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
echo "== host"; uname -a; date -u
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.reserved,memory.used,memory.free --format=csv || echo "(nvidia-smi failed)"
nvidia-smi -q -d MEMORY | sed -n '1,40p' || true
echo "== live tests"
cargo test --release --test live_gpu -- --ignored --nocapture --test-threads=1
rc=$?
echo "== live tests exit status: $rc"
exit $rc
