#!/usr/bin/env bash
# The CPU one refresh costs, for `hmn top` builds and nvtop, each alone in a 160x45 tmux
# terminal with a 1 s refresh against one fake NVML listing N real `sleep` processes. The
# tool's threads' schedstat is polled every 20 ms for WINDOW seconds after SETTLE: a refresh
# is a run of polls in which it used CPU, and its cost is what it used. Each run gives the
# median refresh; the tools take turns, ROUNDS rounds with the order rotated, so a machine
# whose speed drifts from minute to minute weighs on each alike.
#
# Why not a total over a minute (scripts/bench/top_side_by_side.sh): on a machine whose caches
# are cold at each refresh (another tenant's work between them), a refresh costs several
# times what it costs on a quiet one, and a minute's total moved 2x from run to run of the
# same build; the median refresh moves less. Run together, the tools also warm the caches
# for one another (the same processes' files), so the one that refreshes first pays more.
#
# Usage: scripts/bench/top_refresh_cost.sh [-n N] [-r ROUNDS] [-w WINDOW] [-s SETTLE] TOOL...
#   TOOL is `nvtop` or the path of an hmn binary. Needs tmux and python3; nvtop for `nvtop`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
n=20 rounds=3 window=30 settle=6
while getopts "n:r:w:s:" opt; do
  case "$opt" in
    n) n="$OPTARG" ;;
    r) rounds="$OPTARG" ;;
    w) window="$OPTARG" ;;
    s) settle="$OPTARG" ;;
    *) echo "usage: $0 [-n N] [-r ROUNDS] [-w WINDOW] [-s SETTLE] TOOL..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
source "$ROOT/scripts/lib/top_bench.sh"
top_bench_check_tools "$@"
top_bench_setup "$n"

# The median refresh of process $1 over $window seconds, in microseconds.
median_refresh() {
  python3 - "$1" "$window" <<'PY'
import glob, sys, time
pid, window = sys.argv[1], float(sys.argv[2])
def oncpu():
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total
refreshes, run, last, end = [], 0, oncpu(), time.monotonic() + window
while time.monotonic() < end:
    time.sleep(0.02)
    now = oncpu()
    if now > last:
        run += now - last
    elif run:
        refreshes.append(run / 1000)
        run = 0
    last = now
refreshes.sort()
print(f"{refreshes[len(refreshes) // 2]:.0f} {len(refreshes)}" if refreshes else "nan 0")
PY
}

echo "$n GPU processes; each tool alone, ${window} s after ${settle} s; $rounds rounds"
declare -A medians
k=$#
tools=("$@")
for r in $(seq 1 "$rounds"); do
  for i in $(seq 0 $((k - 1))); do
    tool="${tools[$(((i + r - 1) % k))]}"
    cmd="$(top_bench_command "$tool")"
    # A server of its own for each run: a new one started as the last one exits can fail.
    session="hmn-refresh-$$-$r-$i"
    sessions+=("$session")
    tmux -L "$session" -f /dev/null new-session -d -s bench -x 160 -y 45 "$cmd"
    sleep "$settle"
    p="$(tmux -L "$session" display -p -t bench '#{pane_pid}')"
    read -r us count < <(median_refresh "$p")
    tmux -L "$session" kill-server 2>/dev/null || true
    printf 'round %d  %-40s median refresh %6s us (%s refreshes)\n' "$r" "$tool" "$us" "$count"
    medians["$tool"]="${medians[$tool]:-} $us"
  done
done
echo "median of the runs' medians:"
for tool in "$@"; do
  printf '  %-40s %s us\n' "$tool" "$(printf '%s\n' ${medians[$tool]} | sort -n | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}')"
done
