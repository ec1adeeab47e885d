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
source "$ROOT/scripts/lib/top_bench.sh"
top_bench_check_tools "$@"
top_bench_setup "$n"

i=0
for tool in "$@"; do
  i=$((i + 1))
  s="hmn-side-$$-$i"
  sessions+=("$s")
  cmd="$(top_bench_command "$tool")"
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
