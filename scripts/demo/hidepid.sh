#!/usr/bin/env bash
# The README's hidepid transcript, whole: as root, it starts a `sleep` of root's and one of
# nobody's, has the fake NVML list them as holding 16 GiB and 2 GiB of an H200 (and 747 MiB
# more allocated that no listed process accounts for), mounts a procfs with hidepid=invisible
# in a mount namespace of its own, and runs `hmn ps` there as nobody. It cleans up after itself.
# Usage: sudo scripts/demo/hidepid.sh   (needs unshare, setpriv and mount: util-linux)
# HMN_BIN=/path/to/hmn uses that hmn instead of building one (the README test passes its own:
# a build here would replace, under every other running test, the binary they run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
if [ "$(id -u)" != 0 ]; then
  echo "hidepid.sh: run it as root: it mounts a procfs and runs hmn as nobody" >&2
  exit 2
fi
for tool in unshare setpriv mount; do
  command -v "$tool" >/dev/null || { echo "hidepid.sh: $tool (util-linux) is needed" >&2; exit 2; }
done
lib="$(fake_nvml)"
hmn="${HMN_BIN:-}"
if [ -z "$hmn" ]; then
  cargo build -q -p hypomnesis-cli --bin hmn >&2
  hmn="$CARGO_TARGET_DIR/debug/hmn"
fi
[ -x "$hmn" ] || { echo "hidepid.sh: $hmn is not an executable hmn" >&2; exit 2; }
# What nobody runs must be readable by nobody: a directory of its own under /tmp.
demo="$(mktemp -d /tmp/hmn-hidepid.XXXXXX)"
chmod 755 "$demo"
install -m 755 "$hmn" "$demo/hmn"
install -m 755 "$lib" "$demo/libnvidia-ml.so.1"
mkdir "$demo/proc"
sleep 600 &
root_pid=$!
setpriv --reuid nobody --regid nogroup --clear-groups sleep 600 &
nobody_pid=$!
trap 'kill "$root_pid" "$nobody_pid" 2>/dev/null; rm -rf "$demo"' EXIT
# setpriv execs sleep: wait until the pid runs it as nobody.
for _ in $(seq 1 200); do
  [ "$(stat -c %U "/proc/$nobody_pid" 2>/dev/null)" = nobody ] \
    && grep -q sleep "/proc/$nobody_pid/comm" && break
  sleep 0.01
done
mib=$((1 << 20))
total=$((143771 * mib)) reserved=$((614 * mib))
held=$(((16384 + 2048 + 747) * mib))
cat > "$demo/scenario.json" <<EOF
{"devices": [{"name": "NVIDIA H200", "total": $total, "reserved": $reserved,
  "free": $((total - reserved - held)),
  "compute_processes": [{"pid": $root_pid, "used": $((16384 * mib))},
                        {"pid": $nobody_pid, "used": $((2048 * mib))}]}]}
EOF
chmod 644 "$demo/scenario.json"
unshare -m sh -c "mount --make-rprivate / && mount -t proc -o hidepid=invisible proc '$demo/proc' \
  && cd / && exec setpriv --reuid nobody --regid nogroup --clear-groups env -i PATH=/usr/bin:/bin \
  HYPOMNESIS_NVML_LIBRARY='$demo/libnvidia-ml.so.1' FAKE_NVML_SCENARIO='$demo/scenario.json' \
  '$demo/hmn' --procfs '$demo/proc' ps" 2>&1
