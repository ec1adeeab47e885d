#!/usr/bin/env bash
# Live checks on a host with an NVIDIA GPU: what nvidia-smi says, what hmn says (summary, JSON,
# ps, doctor, a short run, the exporter), and the #[ignore]d live tests. Usage: scripts/gpu-check.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
echo "== host"; uname -a; date -u
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.reserved,memory.used,memory.free --format=csv || echo "(nvidia-smi failed)"
nvidia-smi -q -d MEMORY | sed -n '1,30p' || true
# Prebuilt binaries (a GPU host without a Rust toolchain): HMN_BIN and LIVE_TEST_BIN.
H="${HMN_BIN:-$CARGO_TARGET_DIR/release/hmn}"
if [ -z "${HMN_BIN:-}" ]; then
  echo "== build"
  cargo build --release --bin hmn 2>&1 | tail -2  # default features: no debug-output noise
fi
for args in "" "--json" "ps" "ps --json" "doctor"; do
  echo "== hmn $args"; $H $args; echo "(exit $?)"
done
echo "== hmn run (nvidia-smi as the command: a CUDA-less child)"
$H run --interval 50ms -- nvidia-smi -L; echo "(exit $?)"
echo "== hmn serve"
$H serve --listen 127.0.0.1:19835 --min-interval 1s 2>/tmp/serve.err & pid=$!
sleep 2; curl -s http://127.0.0.1:19835/metrics | grep -E '^hypomnesis_(gpu_memory|up|scrape)' | head -20
kill -TERM $pid; wait $pid; echo "(serve exit $?)"
echo "== live tests"
if [ -n "${LIVE_TEST_BIN:-}" ]; then
  "$LIVE_TEST_BIN" --ignored --nocapture --test-threads=1
  rc=$?
else
  cargo test --release --all-features --test live_gpu -- --ignored --nocapture --test-threads=1 2>&1 | grep -vE '^\s+(Compiling|Running)'
  rc=${PIPESTATUS[0]}
fi
echo "== live tests exit status: $rc"
exit $rc
