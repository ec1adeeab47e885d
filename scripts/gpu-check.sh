#!/usr/bin/env bash
# Live checks on a host with an NVIDIA GPU: what nvidia-smi says, what hmn says (summary, JSON,
# ps, doctor, a short run, the exporter) while a PyTorch process of this script holds 3 GiB, and
# the #[ignore]d live tests (which make CUDA contexts of their own through libcuda).
# Usage: scripts/gpu-check.sh. Exits non-zero when any hmn command or live test fails.
# Prebuilt binaries (a GPU host without a Rust toolchain): HMN_BIN and LIVE_TEST_BIN.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
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
  if "$H" ps --pid "$torch_pid" 2>&1 | tee /dev/stderr | grep -q "^$torch_pid "; then
    echo "(listed)"
  else
    failed+=("hmn ps does not list the PyTorch process $torch_pid")
  fi
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
kill -TERM $pid; wait $pid; rc=$?; echo "(serve exit $rc)"
[ "$rc" -eq 0 ] || failed+=("hmn serve exit $rc")

echo "== live tests"
export HMN_LIVE_TORCH_PID="$torch_pid"
skip=()
[ -n "$torch_pid" ] || skip=(--skip the_torch_process_of_gpu_check_is_listed)
if [ -n "${LIVE_TEST_BIN:-}" ]; then
  "$LIVE_TEST_BIN" --ignored --nocapture --test-threads=1 "${skip[@]}"
  rc=$?
else
  cargo test --release --all-features --test live_gpu -- --ignored --nocapture --test-threads=1 "${skip[@]}" 2>&1 \
    | grep -vE '^\s+(Compiling|Running)'
  rc=${PIPESTATUS[0]}
fi
echo "== live tests exit status: $rc"
[ "$rc" -eq 0 ] || failed+=("live tests (exit $rc)")

[ -n "$torch_pid" ] && kill "$torch_pid" 2>/dev/null
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED:"; printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "== all checks passed"
