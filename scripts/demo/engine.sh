#!/usr/bin/env bash
# A serving engine's start on a shared GPU, without a GPU: `hmn run` runs the stand-in engine
# (scripts/standins/engine.py) on the fake NVML, one H200 (140 GiB), beside another process
# that holds memory there. Usage:
#   scripts/demo/engine.sh ENGINE [options] [-- hmn run options]
#     ENGINE            vllm, sglang or trtllm
#     --holds GIB       what the other process holds when the engine starts (default 10)
#     --loads GIB       what it loads meanwhile, while the engine profiles (default 0)
#     --at STEP         when it loads: LOAD, PROFILE (the default), KV or GRAPHS
#     --then-holds GIB  what it holds once --after SECONDS have passed (it finishes its own
#                       start, say), whatever the engine does: for `hmn run --wait-for`
# The other process is a `sleep` this script starts (the driver lists it as `sleep`); its
# memory is a number in a file the fake reads. Works from any directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
engine="${1:?usage: engine.sh vllm|sglang|trtllm [--holds GIB] [--loads GIB] [--at STEP] [-- hmn run options]}"
shift
holds=10 loads=0 at=PROFILE then_holds="" after=1
while [ $# -gt 0 ]; do
  case "$1" in
    --then-holds) then_holds="$2"; shift 2 ;;
    --after) after="$2"; shift 2 ;;
    --holds) holds="$2"; shift 2 ;;
    --loads) loads="$2"; shift 2 ;;
    --at) at="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "engine.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
lib="$(fake_nvml)"
cargo build -q --bin hmn
dir="$(mktemp -d "${TMPDIR:-/tmp}/hmn-engine-demo.XXXXXX")"
sleep 600 &
neighbour=$!
trap 'kill $neighbour 2>/dev/null; rm -rf "$dir"' EXIT
gib=1073741824
total=$((140 * gib))
echo $((holds * gib)) > "$dir/neighbour.used"
echo 0 > "$dir/engine.used"
echo $((total - holds * gib)) > "$dir/free"
cat > "$dir/scenario.json" <<EOF
{"driver_version": "590.48.01",
 "devices": [{"name": "NVIDIA H200", "uuid": "GPU-6f2c1a9e-3b7d-4c55-9e0a-1d2b3c4d5e6f",
   "total": $total, "reserved": 643825664, "free_file": "$dir/free",
   "compute_processes": [
     {"pid_file": "$dir/engine.pid", "used": 0, "used_file": "$dir/engine.used"},
     {"pid": $neighbour, "used": 0, "used_file": "$dir/neighbour.used"}]}]}
EOF
if [ -n "$then_holds" ]; then
  # Before the engine starts: the free figure is the total less what the other holds.
  ( sleep "$after"; echo $((then_holds * gib)) > "$dir/neighbour.used"
    echo $((total - then_holds * gib)) > "$dir/free" ) &
fi
export HMN_STANDIN_DIR="$dir" HMN_STANDIN_TOTAL="$total" HMN_STANDIN_OTHERS="$dir/neighbour.used"
if [ "$loads" != 0 ]; then
  export "HMN_STANDIN_HOOK_$at=echo $(((holds + loads) * gib)) > '$dir/neighbour.used'"
fi
HYPOMNESIS_NVML_LIBRARY="$lib" FAKE_NVML_SCENARIO="$dir/scenario.json" \
  "$CARGO_TARGET_DIR/debug/hmn" run --interval 50ms "$@" -- python3 scripts/standins/engine.py "$engine"
