# Sourced by the `hmn top` benchmarks (scripts/bench/top_*.sh) after common.sh: one fake NVML
# whose single H200 lists N real `sleep` processes, and the command that runs a tool against
# it in a terminal. A script calls top_bench_check_tools, then top_bench_setup, and runs its
# tmux servers under the names it adds to `sessions`; top_bench_cleanup ends them all.

# Refuses (exit 2) a TOOL that is neither nvtop (installed) nor an executable hmn; tmux needed.
top_bench_check_tools() {
  local me tool
  me="$(basename "$0" .sh)"
  [ "$#" -gt 0 ] || { echo "$me: name at least one tool (nvtop, or an hmn binary)" >&2; exit 2; }
  command -v tmux >/dev/null || { echo "$me: tmux is needed" >&2; exit 2; }
  for tool in "$@"; do
    if [ "$tool" = nvtop ]; then
      command -v nvtop >/dev/null || { echo "$me: nvtop is not installed" >&2; exit 2; }
    elif [ ! -x "$tool" ]; then
      echo "$me: $tool is not an executable hmn" >&2; exit 2
    fi
  done
}

# Makes `work` (a fresh folder: lib/ with the fake NVML, sys/ empty, scenario.json), starts $1
# `sleep` processes (their pids in `sleepers`) and sets the trap that cleans up on exit.
top_bench_setup() {
  local n="$1" lib
  work="$(mktemp -d /tmp/hmn-top-bench.XXXXXX)"
  sleepers=()
  sessions=()
  trap top_bench_cleanup EXIT
  lib="$(fake_nvml)"
  mkdir "$work/lib" "$work/sys"
  # nvtop dlopens libnvidia-ml.so (then .so.1) through LD_LIBRARY_PATH; hmn is given the file.
  cp "$lib" "$work/lib/libnvidia-ml.so.1"
  ln -s libnvidia-ml.so.1 "$work/lib/libnvidia-ml.so"
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
}

top_bench_cleanup() {
  local s
  for s in "${sessions[@]}"; do tmux -L "$s" kill-server 2>/dev/null || true; done
  [ "${#sleepers[@]}" -gt 0 ] && kill "${sleepers[@]}" 2>/dev/null
  rm -rf "$work"
}

# The command line that runs tool $1 (nvtop or an hmn binary) against the fake NVML with a
# 1 s refresh.
top_bench_command() {
  if [ "$1" = nvtop ]; then
    echo "env LD_LIBRARY_PATH=$work/lib FAKE_NVML_SCENARIO=$work/scenario.json nvtop -d 10"
  else
    echo "env HYPOMNESIS_NVML_LIBRARY=$work/lib/libnvidia-ml.so.1 FAKE_NVML_SCENARIO=$work/scenario.json HYPOMNESIS_SYSFS=$work/sys $1 top --interval 1s"
  fi
}
