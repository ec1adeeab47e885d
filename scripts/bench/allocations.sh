#!/usr/bin/env bash
# The kubelet's part of one `hmn serve` measurement at 5,000, 30,000 and 100,000 allocations
# (through a stand-in pod-resources socket), beside the former quadratic assignment, in one
# run: a release build of hmn's unit test `bench_allocations_at_scale`.
# Usage: scripts/bench/allocations.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo test -q --release -p hypomnesis-cli --bin hmn -- --ignored --nocapture kube::tests::bench_allocations_at_scale 2>&1 \
  | grep -E 'allocations:|test result'
