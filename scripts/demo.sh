#!/usr/bin/env bash
# Try hmn without a GPU: builds the fake NVML library (fake-nvml/) and runs hmn against the
# two-H200 scenario in docs/demo-scenario.json. Usage: scripts/demo.sh [hmn arguments…]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p fake-nvml --target-dir target/fake-builds/modern
cp target/fake-builds/modern/debug/libnvidia_ml.so target/fake-builds/modern/libnvidia-ml.so.1
cargo build -q --release
HYPOMNESIS_NVML_LIBRARY="$PWD/target/fake-builds/modern/libnvidia-ml.so.1" \
FAKE_NVML_SCENARIO="$PWD/docs/demo-scenario.json" \
  target/release/hmn "$@"
