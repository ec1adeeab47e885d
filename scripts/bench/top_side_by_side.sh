#!/usr/bin/env bash
# `hmn top` builds and nvtop at the same time, each in its own 160x45 tmux terminal with a 1 s
# refresh, against one fake NVML listing N real `sleep` processes: after SETTLE seconds, the
# on-CPU time of each (the sum of its threads' schedstat, nanoseconds) over WINDOW seconds and
# its VmRSS at the end. Running them together puts every tool under the same load, so their
# ratios hold where a shared machine's load moves absolute figures from minute to minute
# (scripts/bench/top_vs_peers.py runs them one after another, each alone). The order of the
# TOOLs matters on a small machine (the same build took 1.6x nvtop's CPU started first, 1.1x
# started second, BENCHMARKS.md 2026-12-05): rotate it across runs and quote the median.
#
# Usage: scripts/bench/top_side_by_side.sh [-n N] [-w WINDOW] [-s SETTLE] TOOL...
#   TOOL is `nvtop` or the path of an hmn binary (e.g. target/release/hmn, and a copy of an
#   older build to compare with). Needs tmux; nvtop for `nvtop`. The fake NVML is built here.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
n=20 window=60 settle=10
while getopts "n:w:s:" opt; do
  case "$opt" in
    n) n="$OPTARG" ;;
    w) window="$OPTARG" ;;
    s) settle="$OPTARG" ;;
    *) echo "usage: $0 [-n N] [-w WINDOW] [-s SETTLE] TOOL..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "$#" -gt 0 ] || { echo "top_side_by_side: name at least one tool (nvtop, or an hmn binary)" >&2; exit 2; }
command -v tmux >/dev/null || { echo "top_side_by_side: tmux is needed" >&2; exit 2; }
for tool in "$@"; do
  if [ "$tool" = nvtop ]; then
    command -v nvtop >/dev/null || { echo "top_side_by_side: nvtop is not installed" >&2; exit 2; }
  elif [ ! -x "$tool" ]; then
    echo "top_side_by_side: $tool is not an executable hmn" >&2; exit 2
  fi
done

work="$(mktemp -d /tmp/hmn-side.XXXXXX)"
lib="$(fake_nvml)"
# nvtop dlopens libnvidia-ml.so (then .so.1) through LD_LIBRARY_PATH; hmn is given the file.
mkdir "$work/lib" "$work/sys"
cp "$lib" "$work/lib/libnvidia-ml.so.1"
ln -s libnvidia-ml.so.1 "$work/lib/libnvidia-ml.so"
sleepers=()
sessions=()
cleanup() {
  for s in "${sessions[@]}"; do tmux -L "$s" kill-server 2>/dev/null || true; done
  [ "${#sleepers[@]}" -gt 0 ] && kill "${sleepers[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 "$n"); do
  sleep 100000 &
  sleepers+=($!)
done
python3 - "${sleepers[@]}" > "$work/scenario.json" <<'PY'
import json, sys
MIB = 1 << 20
pids = [int(p) for p in sys.argv[1:]]
total, reserved = 143771 * MIB, 614 * MIB
print(json.dumps({"devices": [{
    "name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
    "total": total, "reserved": reserved, "free": total - reserved - len(pids) * MIB,
    "compute_processes": [{"pid": p, "used": MIB} for p in pids]}]}))
PY

i=0
for tool in "$@"; do
  i=$((i + 1))
  s="hmn-side-$$-$i"
  sessions+=("$s")
  if [ "$tool" = nvtop ]; then
    cmd="env LD_LIBRARY_PATH=$work/lib FAKE_NVML_SCENARIO=$work/scenario.json nvtop -d 10"
  else
    cmd="env HYPOMNESIS_NVML_LIBRARY=$work/lib/libnvidia-ml.so.1 FAKE_NVML_SCENARIO=$work/scenario.json HYPOMNESIS_SYSFS=$work/sys $tool top --interval 1s"
  fi
  tmux -L "$s" -f /dev/null new-session -d -s bench -x 160 -y 45 "$cmd"
done
sleep "$settle"

# On-CPU nanoseconds of a process: the first field of each thread's schedstat, summed.
oncpu() {
  local sum=0 ns _
  for f in /proc/"$1"/task/*/schedstat; do
    read -r ns _ < "$f" || continue
    sum=$((sum + ns))
  done
  echo "$sum"
}
pids=()
start=()
for s in "${sessions[@]}"; do
  p="$(tmux -L "$s" display -p -t bench '#{pane_pid}')"
  pids+=("$p")
  start+=("$(oncpu "$p")")
done
sleep "$window"
echo "$n GPU processes, ${window} s after ${settle} s of settling; load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
for tool in "$@"; do
  p="${pids[$i]}"
  ms=$((($(oncpu "$p") - ${start[$i]}) / 1000000))
  rss="$(awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$p/status")"
  printf '%s: %d ms on CPU, RSS %s\n' "$tool" "$ms" "$rss"
  i=$((i + 1))
done
