#!/usr/bin/env bash
# Mutation testing of the core with cargo-mutants (configuration: scripts/mutants/mutants.toml).
# Usage: scripts/mutants/mutants.sh [cargo-mutants options…]
#   scripts/mutants/mutants.sh                       the full run (hours on two cores)
#   scripts/mutants/mutants.sh --in-diff FILE.diff   only the code a diff touches
#   git diff 4b825dc -- crates/hypomnesis/src/gpu/mig.rs > f.diff &&
#   scripts/mutants/mutants.sh --in-diff f.diff      one file (4b825dc is git's empty tree:
#                                                    the whole file counts as changed; -f
#                                                    adds to the configuration's globs, it
#                                                    does not narrow them)
# Property tests run with PROPTEST_CASES (default 256) cases per property here.
# Needs cargo-mutants: cargo install cargo-mutants --locked
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# cargo-mutants builds each mutant in a scratch copy of the tree with a target directory of its
# own; a shared CARGO_TARGET_DIR would mix mutated builds with this tree's.
unset CARGO_TARGET_DIR
export PROPTEST_CASES="${PROPTEST_CASES:-256}"
# The workspace's default member is hmn: the library is named, or nothing would be mutated.
exec cargo mutants --config scripts/mutants/mutants.toml --package hypomnesis --no-shuffle "$@"
