#!/usr/bin/env bash
# The property tests at full strength: 100,000 cases per property (CI runs a few thousand).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
PROPTEST_CASES="${PROPTEST_CASES:-100000}" cargo test --release -p hypomnesis --all-features --test tests -- properties:: --nocapture
