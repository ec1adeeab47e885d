#!/usr/bin/env bash
# `hmn ghosts` on a GPU node stood in by a private mount namespace, with real processes: what the
# README's "Where did my GPU memory go?" shows. Root only (mounts).
#
# The node: /proc/devices (a file bind-mounted over it) names major 1 as NVIDIA's
# `nvidia-frontend` and major 10 as `nvidia-uvm`; the driver's information file (a tmpfs over
# /proc/driver) gives GPU 0 minor 7; /dev (a tmpfs) holds /dev/nvidia7 as the character device
# 1:7 (it opens as /dev/full does) and /dev/nvidia-uvm as 10:237 (/dev/loop-control's numbers).
# The fake NVML lists one process on GPU 0 with 12 GiB: a trainer that has exited, whose data
# loader (a child in its session, holding both device files: a CUDA context) lives on. Beside
# them run `nvidia-persistenced` (a copy of sleep under that name, holding the GPU's file and no
# context) and an unrelated job holding the GPU's file and a context.
#
# Usage: scripts/demo/ghost-node.sh [hmn ghosts arguments…]  (builds hmn and the fake NVML)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
if [ "$(id -u)" != 0 ]; then
  echo "ghost-node.sh: the GPU node stand-in needs root (mounts in a private mount namespace)" >&2
  exit 2
fi
lib="$(fake_nvml)"
cargo build -q --bin hmn
export HMN="$CARGO_TARGET_DIR/debug/hmn" HYPOMNESIS_NVML_LIBRARY="$lib"
export HYPOMNESIS_SYSFS="$ROOT/docs"  # no AMD or Intel card: a folder without drm/
exec unshare --mount bash -s -- "$@" <<'NODE'
set -euo pipefail
mount --make-rprivate /
node=$(mktemp -d)
uuid=GPU-fa4e0000-0000-4000-8000-000000000000
printf 'Character devices:\n  1 nvidia-frontend\n 10 nvidia-uvm\n' > "$node/devices"
mount --bind "$node/devices" /proc/devices
mount -t tmpfs hmn-driver /proc/driver
mkdir -p /proc/driver/nvidia/gpus/0000:01:00.0
printf 'Model: \t NVIDIA H200\nGPU UUID: \t %s\nBus Location: \t 0000:01:00.0\nDevice Minor: \t 7\n' \
  "$uuid" > /proc/driver/nvidia/gpus/0000:01:00.0/information
mount -t tmpfs hmn-dev /dev
mknod -m 666 /dev/nvidia7 c 1 7
mknod -m 666 /dev/nvidia-uvm c 10 237
mknod -m 666 /dev/null c 1 3
cp /bin/sleep "$node/nvidia-persistenced"
"$node/nvidia-persistenced" 600 < /dev/nvidia7 & persistenced=$!
cp /bin/sleep "$node/other-job"
"$node/other-job" 600 < /dev/nvidia7 3< /dev/nvidia-uvm & other=$!
# The trainer: a session leader whose data loader holds both files; then the trainer exits.
cp /bin/sleep "$node/data-loader"
setsid bash -c 'echo $$ > '"$node"'/trainer
  "'"$node"'/data-loader" 600 < /dev/nvidia7 3< /dev/nvidia-uvm > /dev/null 2>&1 &' &
wait $!
trainer=$(cat "$node/trainer")
while [ -d "/proc/$trainer" ]; do sleep 0.01; done
total=150754820096; reserved=645922816; used=12884901888
printf '{"devices": [{"name": "NVIDIA H200", "uuid": "%s", "total": %s, "reserved": %s, "free": %s, "compute_processes": [{"pid": %s, "used": %s}]}]}' \
  "$uuid" "$total" "$reserved" $((total - reserved - used)) "$trainer" "$used" > "$node/scenario.json"
status=0
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" ghosts "$@" || status=$?
pkill -f "$node/" || true
exit "$status"
NODE
