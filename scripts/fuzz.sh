#!/usr/bin/env bash
# The property tests at full strength: 100,000 cases per property (CI runs a few thousand).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PROPTEST_CASES="${PROPTEST_CASES:-100000}" cargo test --release --all-features --test proptest_parsers -- --nocapture
