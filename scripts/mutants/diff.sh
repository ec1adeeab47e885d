#!/usr/bin/env bash
# Mutation testing of the code a change touches, within a bounded budget (what .ci/run runs).
# Usage: scripts/mutants/diff.sh [BASE] [MAX]
#   BASE  the commit to diff against (default HEAD~1: the last commit's change)
#   MAX   most mutants to test (default 40); a larger diff is cut into shards of about MAX
#         mutants and one shard is tested, chosen by the commit, so successive commits cover
#         different shards.
# Fails when a mutant survives (exit 2 from cargo-mutants); a mutant that makes the tests hang
# is killed at the timeout and counts as caught. MUTANTS_BUDGET (seconds; unset: none) bounds
# the whole run: when it runs out, the mutants tested so far are judged and the rest left.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
base="${1:-HEAD~1}"
max="${2:-40}"
budget="${MUTANTS_BUDGET:-}"
case "$budget" in
  ''|*[!0-9]*) [ -z "$budget" ] || { echo "mutants-diff: MUTANTS_BUDGET must be whole seconds, not '$budget'"; exit 1; } ;;
esac
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "mutants-diff: no commit $base to compare with; nothing to test"
  exit 0
fi
diff="$CARGO_TARGET_DIR/mutants.diff"
mkdir -p "$CARGO_TARGET_DIR"
git diff "$base" -- crates/hypomnesis/src > "$diff"
unset CARGO_TARGET_DIR
n=$(cargo mutants --config scripts/mutants/mutants.toml --package hypomnesis --list --in-diff "$diff" 2>/dev/null | wc -l)
echo "mutants-diff: $n mutants in the code changed since $base"
if [ "$n" -eq 0 ]; then
  exit 0
fi
shards=$(( (n + max - 1) / max ))
pick=$(( 16#$(git rev-parse --short=6 HEAD) % shards ))
shard=()
if [ "$shards" -gt 1 ]; then
  shard=(--shard "$pick/$shards")
  echo "mutants-diff: testing shard $pick of $shards (about $max mutants)"
fi
rc=0
if [ -n "$budget" ]; then
  timeout --signal=INT --kill-after=30 "$budget" \
    "$(dirname "${BASH_SOURCE[0]}")/mutants.sh" --in-diff "$diff" "${shard[@]}" -j 1 || rc=$?
else
  "$(dirname "${BASH_SOURCE[0]}")/mutants.sh" --in-diff "$diff" "${shard[@]}" -j 1 || rc=$?
fi
case "$rc" in
  0|3) exit 0 ;;  # all caught (3: some by timing out)
  124|137)
    # The time budget ran out: what was tested is judged, the rest is left for the next run.
    tested=0
    for f in caught timeout unviable missed; do
      [ -f "mutants.out/$f.txt" ] && tested=$((tested + $(wc -l < "mutants.out/$f.txt")))
    done
    if [ -s mutants.out/missed.txt ]; then
      echo "mutants-diff: within the ${budget} s budget, mutants survived:"
      cat mutants.out/missed.txt
      exit 2
    fi
    echo "mutants-diff: the ${budget} s budget ran out after $tested mutants, none of them surviving"
    exit 0
    ;;
  *) echo "mutants-diff: cargo-mutants exited $rc (2: a mutant survived; see mutants.out/missed.txt)"; exit "$rc" ;;
esac
