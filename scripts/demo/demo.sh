#!/usr/bin/env bash
# Try hmn without a GPU: builds the fake NVML library (crates/fake-nvml) and runs hmn against a
# simulated GPU host. Usage: scripts/demo/demo.sh [hmn arguments…]
# The scenario is docs/demo-scenario.json (two H200s) unless HMN_DEMO_SCENARIO names another
# file, e.g. docs/demo-run-scenario.json for the `hmn run` example of the README.
# Works from any directory, and honours CARGO_TARGET_DIR.
set -euo pipefail
scenario="${HMN_DEMO_SCENARIO:-docs/demo-scenario.json}"
case "$scenario" in /*) ;; *) [ -e "$scenario" ] && scenario="$PWD/$scenario" ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
case "$scenario" in /*) ;; *) scenario="$ROOT/$scenario" ;; esac
lib="$(fake_nvml)"
cargo build -q --bin hmn
# A pid file the scenario names is the command's to write: one an earlier run left would list
# its process, gone since, beside this run's (as a neighbour that let go of its memory).
{ grep -o '"pid_file": *"[^"]*"' "$scenario" || true; } | sed 's/.*"\([^"]*\)"$/\1/' | while read -r f; do
  rm -f "$f"
done
HYPOMNESIS_NVML_LIBRARY="$lib" FAKE_NVML_SCENARIO="$scenario" \
  exec "$CARGO_TARGET_DIR/debug/hmn" "$@"
