#!/usr/bin/env bash
# Live checks on a host with an NVIDIA GPU: what nvidia-smi says, what hmn says (summary, JSON,
# ps, doctor, a short run, the exporter) while a PyTorch process of this script holds 3 GiB, and
# the #[ignore]d live tests (which make CUDA contexts of their own through libcuda), and the
# Python package's track() around a 3 GiB torch tensor (from a prebuilt wheel: HMN_WHEEL).
# Usage: scripts/gpu/check.sh. Exits non-zero when any hmn command or live test fails.
# Prebuilt binaries (a GPU host without a Rust toolchain): HMN_BIN and LIVE_TEST_BIN (the
# library's test binary: `cargo test --release -p hypomnesis --all-features --test tests --no-run`).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
failed=()
check() {  # check NAME COMMAND…: run it, record a failure by name
  local name="$1"; shift
  echo "== $name"
  "$@"
  local rc=$?
  echo "(exit $rc)"
  [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
}

echo "== host"; uname -a; date -u; nproc
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.reserved,memory.used,memory.free --format=csv \
  || failed+=("nvidia-smi --query-gpu")
nvidia-smi -q -d MEMORY | sed -n '1,30p'
H="${HMN_BIN:-$CARGO_TARGET_DIR/release/hmn}"
if [ -z "${HMN_BIN:-}" ]; then
  echo "== build"
  cargo build --release --bin hmn 2>&1 | tail -2  # default features: no debug-output noise
fi

# A CUDA process of our own, so the process lists have a real row to show.
torch_pid=""
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "== a PyTorch process holding 3 GiB"
  python3 -u -c "
import time, torch
x = torch.empty(3 << 30, dtype=torch.uint8, device='cuda')
print('READY', flush=True)
time.sleep(120)
" > /tmp/hmn-torch.out 2>&1 &
  torch_pid=$!
  for _ in $(seq 1 120); do grep -q READY /tmp/hmn-torch.out && break; sleep 0.5; done
  if grep -q READY /tmp/hmn-torch.out; then
    echo "pid $torch_pid"
  else
    cat /tmp/hmn-torch.out; failed+=("the PyTorch process did not start"); torch_pid=""
  fi
else
  echo "== (no python3 with CUDA-enabled torch: the PyTorch checks are skipped)"
  failed+=("python3 with torch is missing")
fi

check "hmn" "$H"
check "hmn --json" "$H" --json
check "hmn ps" "$H" ps
check "hmn ps --json" "$H" ps --json
check "hmn doctor" "$H" doctor
if [ -n "$torch_pid" ]; then
  echo "== hmn ps lists the PyTorch process"
  # (Not `tee /dev/stderr`: where stderr is a file, that opens it again at offset 0 and
  # writes over the start of the log.)
  listed="$("$H" ps --pid "$torch_pid" 2>&1)"
  printf '%s\n' "$listed"
  if grep -q "^$torch_pid " <<<"$listed"; then
    echo "(listed)"
  else
    failed+=("hmn ps does not list the PyTorch process $torch_pid")
  fi
fi
# Ghosts on a real GPU: a live process that holds memory is no ghost (exit 0); after it has
# done nothing for a few seconds, the driver's activity samples may call it idle (shown, not
# gated: a driver may keep no samples).
check "hmn ghosts (none expected)" "$H" ghosts
if [ -n "$torch_pid" ]; then
  echo "== hmn ps --why --idle-after 3s (the PyTorch process has been idle since it started)"
  sleep 4
  "$H" ps --why --idle-after 3s; echo "(exit $?)"
  "$H" ghosts --idle-after 3s; echo "(exit $?)"
fi
if [ -n "$torch_pid" ]; then
  # Does the driver keep activity samples for a process that worked? One that multiplies for
  # 3 s, then sleeps: looked at 1 s into its sleep (busy within 3 s) and 5 s into it.
  echo "== activity samples: a PyTorch process busy for 3 s, then idle"
  python3 -u -c "
import time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
print('BUSY', flush=True)
t = time.time()
while time.time() - t < 3:
    a @ a
torch.cuda.synchronize()
print('IDLE', flush=True)
time.sleep(20)
" > /tmp/hmn-busy.out 2>&1 &
  busy_pid=$!
  for _ in $(seq 1 120); do grep -q IDLE /tmp/hmn-busy.out && break; sleep 0.25; done
  sleep 1
  "$H" ps --why --idle-after 3s --pid "$busy_pid"; echo "(exit $?)"
  sleep 4
  "$H" ps --why --idle-after 3s --pid "$busy_pid"; echo "(exit $?)"
  # The first PyTorch process, idle all along, once the busy one's samples cover the span.
  echo "== hmn ghosts --idle-after 3s (after the busy process)"
  "$H" ghosts --idle-after 3s; echo "(exit $?)"
  kill "$busy_pid" 2>/dev/null
fi
echo "== memory model facts (issue 41): addressing mode, NUMA nodes"
nvidia-smi -q | grep -iE "addressing|numa|product (name|architecture)" | head -10
echo "nodes online: $(cat /sys/devices/system/node/online 2>/dev/null || echo '(none)')"
for n in /sys/devices/system/node/node*; do
  [ -d "$n" ] && echo "$(basename "$n"): cpus $(cat "$n/cpulist" 2>/dev/null) $(grep -m1 MemTotal "$n/meminfo" 2>/dev/null | awk '{print $4, $5}')"
done
# Whose numbers the driver's pids are for a process in a PID namespace of its own: the library
# takes them as the caller's namespace's from driver 570.86.15 (the open kernel modules'
# gpu_rmapi.c) and as the host's before. A CUDA process under `unshare --pid --fork
# --mount-proc` prints its getpid() and what NVML lists from inside; `hmn ps --json` runs inside
# the namespace too (it must place the process as its own, named, under a caller-numbering
# driver) and on the host (where its host pid is listed, or it is not listed at all).
echo "== PID namespace: NVML's pid of a CUDA process in a PID namespace of its own"
if command -v unshare >/dev/null && python3 -c "import torch, pynvml" 2>/dev/null; then
  rm -f /tmp/hmn-ns-ready
  HMN_IN_NS="$H" unshare --pid --fork --mount-proc sh -c '
python3 -u -c "
import os, time, torch, pynvml
x = torch.empty(1 << 28, device=\"cuda\")
torch.cuda.synchronize()
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
ver = pynvml.nvmlSystemGetDriverVersion()
print(\"inside the namespace: getpid\", os.getpid(), \"NVML lists\", pids, \"driver\", ver)
print(\"verdict:\", \"the caller namespace numbers\" if os.getpid() in pids else \"not its own number\")
open(\"/tmp/hmn-ns-ready\", \"w\").write(str(os.getpid()))
time.sleep(8)
" & py=$!
for _ in $(seq 1 120); do [ -s /tmp/hmn-ns-ready ] && break; sleep 0.25; done
echo "== hmn ps --json inside the namespace"
"$HMN_IN_NS" ps --json; echo "(exit $?)"
"$HMN_IN_NS" doctor | grep "^pids:"
wait $py
' & ns=$!
  for _ in $(seq 1 120); do [ -s /tmp/hmn-ns-ready ] && break; sleep 0.25; done
  sleep 1
  echo "== hmn ps on the host while it runs"
  "$H" ps; echo "(exit $?)"
  wait $ns
  rm -f /tmp/hmn-ns-ready
else
  echo "(skipped: no unshare, or python3 lacks torch and pynvml)"
fi
check "hmn run (nvidia-smi as the command: a CUDA-less child)" "$H" run --interval 50ms -- nvidia-smi -L

echo "== hmn serve"
"$H" serve --listen 127.0.0.1:19835 --min-interval 1s 2>/tmp/serve.err & pid=$!
sleep 2
if curl -sf http://127.0.0.1:19835/metrics > /tmp/hmn-metrics.txt; then
  grep -E '^hypomnesis_(gpu_memory|gpu_process|up|scrape)' /tmp/hmn-metrics.txt | head -20
else
  failed+=("hmn serve did not answer /metrics"); cat /tmp/serve.err
fi
# After its graceful stop, serve exits as a shell reports the signal: 128 + 15.
kill -TERM $pid; wait $pid; rc=$?; echo "(serve exit $rc)"; cat /tmp/serve.err
[ "$rc" -eq 143 ] || failed+=("hmn serve exit $rc after SIGTERM (143 expected)")

echo "== live tests"
export HMN_LIVE_TORCH_PID="$torch_pid"
skip=()
[ -n "$torch_pid" ] || skip=(--skip the_torch_process_of_gpu_check_is_listed)
if [ -n "${LIVE_TEST_BIN:-}" ]; then
  "$LIVE_TEST_BIN" backends::live_gpu:: --ignored --nocapture --test-threads=1 "${skip[@]}"
  rc=$?
else
  cargo test --release -p hypomnesis --all-features --test tests -- backends::live_gpu:: --ignored --nocapture --test-threads=1 "${skip[@]}" 2>&1 \
    | grep -vE '^\s+(Compiling|Running)'
  rc=${PIPESTATUS[0]}
fi
echo "== live tests exit status: $rc"
[ "$rc" -eq 0 ] || failed+=("live tests (exit $rc)")

echo "== Python: hypomnesis.track() around a 3 GiB torch.empty on the GPU"
# The wheel: HMN_WHEEL (a .whl, or a folder holding one), else target/wheels/ (what
# `pip wheel ./python --no-deps -w target/wheels` leaves). Installed, offline, into a venv that
# sees the host's torch and pynvml.
wheel_from="${HMN_WHEEL:-target/wheels}"
wheel=""
if [ -f "$wheel_from" ]; then
  wheel="$wheel_from"
elif [ -d "$wheel_from" ]; then
  wheel="$(ls -t "$wheel_from"/hypomnesis-*.whl 2>/dev/null | head -1)"
fi
if [ -z "$wheel" ]; then
  echo "(skipped: no hypomnesis wheel in ${wheel_from}; build one with"
  echo " 'pip wheel ./python --no-deps -w target/wheels' and carry it, or set HMN_WHEEL)"
elif ! python3 -c "import torch, pynvml; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "(skipped: python3 lacks CUDA-enabled torch or pynvml)"
else
  # Installed beside, not in a venv: a venv made from a python3 that is itself a venv's (the
  # H200 image's /opt/torch/.venv) does not see that venv's packages, torch and pynvml among them.
  pysite=/tmp/hmn-py-site
  rm -rf "$pysite"
  if python3 -m pip install -q --no-index --no-deps --target "$pysite" "$wheel"; then
    check "python: track() around torch.empty(3 GiB)" env PYTHONPATH="$pysite" python3 -u - <<'PYEOF'
import os
import hypomnesis
import pynvml
import torch

GIB = 1 << 30
# No CUDA call before the block: its peak holds the CUDA context as well as the tensor.
with hypomnesis.track(interval=0.01) as t:
    x = torch.empty(3 * GIB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    reserved = torch.cuda.max_memory_reserved()
print(t)
held = {d: v for d, v in t.peak_gpu_bytes.items() if v}
print("peak GPU bytes per device:", t.peak_gpu_bytes, "| torch max_memory_reserved:", reserved)
assert len(held) == 1, f"expected this process's memory on exactly one GPU, got {held}"
(index, peak), = held.items()
context = peak - reserved
print(f"GPU {index}: peak {peak} B = torch's reservation {reserved} B + {context} B (CUDA context)")
assert reserved >= 3 * GIB, reserved
assert peak >= 3 * GIB and peak > reserved, "the peak must hold the tensor and the context"
assert context < 2 * GIB, f"{context} B beyond torch's reservation is more than a context"
assert t.peak_gpu_delta_bytes[index] == peak - (t.baseline.gpu_bytes[index] or 0)

# What NVML itself lists for this pid, through pynvml, on the same device (hypomnesis numbers
# NVIDIA GPUs in NVML's order; the UUIDs say it is the same one).
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(index)
uuid = pynvml.nvmlDeviceGetUUID(handle)
uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
assert uuid == hypomnesis.device_info(index).uuid, (uuid, hypomnesis.device_info(index))
rows = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == os.getpid()]
assert rows, f"NVML does not list pid {os.getpid()} on {uuid}"
nvml_bytes = rows[0].usedGpuMemory
own = hypomnesis.process_gpu_info(index)
print(f"NVML (pynvml) lists {nvml_bytes} B for pid {os.getpid()}; hypomnesis: {own}")
assert own.is_per_process and own.used_bytes == nvml_bytes
assert t.final.gpu_bytes[index] == nvml_bytes <= peak, (t.final.gpu_bytes, nvml_bytes, peak)
del x
print("OK")
PYEOF
  else
    failed+=("installing the wheel $wheel into $pysite")
  fi
fi

[ -n "$torch_pid" ] && kill "$torch_pid" 2>/dev/null
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED:"; printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "== all checks passed"
