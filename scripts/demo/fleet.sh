#!/usr/bin/env bash
# A fleet on loopback for `hmn fits --prometheus`: four `hmn serve` against the fake NVML
# (node-a: an H200 whose 20 GiB a zombie holds; node-b: two H100s; node-c: an H200 in MIG mode;
# node-d: an idle H200), each scraped by a real Prometheus with its `node` label, then
# `hmn fits ARGS… --prometheus <that Prometheus>`. Needs `prometheus` on PATH (Debian:
# prometheus). Usage: scripts/demo/fleet.sh 110GiB [--count 2] [--json] …
# or, for the live view of the same fleet: scripts/demo/fleet.sh top [--interval 1s] …
# Works from any directory, and honours CARGO_TARGET_DIR. Everything it starts is stopped
# when it ends.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
command -v prometheus >/dev/null || { echo "fleet.sh: prometheus is not on PATH" >&2; exit 2; }
lib="$(fake_nvml)"
cargo build -q --bin hmn
hmn="$CARGO_TARGET_DIR/debug/hmn"
work="$(mktemp -d)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
G=1073741824
# A zombie for node-a's ghost: `sleep 0`, whose parent (an exec'd sleep) never reaps it.
sh -c 'sleep 0 & echo $! > "$1"; exec sleep 600' sh "$work/zombie" & pids+=($!)
while [ ! -s "$work/zombie" ]; do sleep 0.05; done
zombie="$(cat "$work/zombie")"
# Three processes for the other GPUs' memory (9.5, 49.5 and 45.5 GiB beside the 0.5 GiB the
# driver reserves), so that no memory is left that no process accounts for.
sleepers=()
for _ in 1 2 3; do sleep 600 & pids+=($!); sleepers+=($!); done
held() { echo ", \"compute_processes\": [{\"pid\": $1, \"used\": $(($2 * G / 2))}]"; }
gpu() { # name uuid total_gib free_gib [extra json]
  echo "{\"name\": \"$1\", \"uuid\": \"$2\", \"total\": $(($3 * G)), \"free\": $(($4 * G)), \"reserved\": $((G / 2)) ${5:-}}"
}
echo "{\"devices\": [$(gpu "NVIDIA H200" GPU-aaaaaaaa-0000-4000-8000-000000000000 141 100 \
  ", \"compute_processes\": [{\"pid\": $zombie, \"used\": $((20 * G))}]")]}" > "$work/a.json"
echo "{\"devices\": [$(gpu "NVIDIA H100 80GB HBM3" GPU-bbbbbbbb-0000-4000-8000-000000000000 80 70 \
  "$(held "${sleepers[0]}" 19)"), \
$(gpu "NVIDIA H100 80GB HBM3" GPU-bbbbbbbb-0000-4000-8000-000000000001 80 30 \
  "$(held "${sleepers[1]}" 99)")]}" > "$work/b.json"
echo "{\"devices\": [$(gpu "NVIDIA H200" GPU-cccccccc-0000-4000-8000-000000000000 141 120 \
  ", \"mig_mode\": 1, \"mig_devices\": [{\"gpu_instance_id\": 1, \"name\": \"NVIDIA H200 MIG 3g.71gb\", \"total\": $((71 * G)), \"free\": $((60 * G))}, {\"gpu_instance_id\": 2, \"name\": \"NVIDIA H200 MIG 3g.71gb\", \"total\": $((70 * G)), \"free\": $((10 * G))}]")]}" > "$work/c.json"
echo "{\"devices\": [$(gpu "NVIDIA H200" GPU-dddddddd-0000-4000-8000-000000000000 141 95 \
  "$(held "${sleepers[2]}" 91)")]}" > "$work/d.json"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
targets=""
for n in a b c d; do
  port="$(free_port)"
  HYPOMNESIS_NVML_LIBRARY="$lib" FAKE_NVML_SCENARIO="$work/$n.json" PATH=/nonexistent \
    "$hmn" serve --listen "127.0.0.1:$port" --min-interval 1s 2> "$work/serve-$n.log" & pids+=($!)
  targets+="      - targets: ['127.0.0.1:$port']"$'\n'"        labels: {node: node-$n}"$'\n'
done
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: hmn
    static_configs:
$targets
YAML
prom="127.0.0.1:$(free_port)"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="$prom" > "$work/prometheus.log" 2>&1 & pids+=($!)
# Until Prometheus has every node, and node-a's ghost.
for _ in $(seq 120); do
  if "$hmn" fits 1GiB --prometheus "http://$prom" --json 2>/dev/null \
      | python3 -c 'import json, sys; j = json.load(sys.stdin); sys.exit(0 if len({g["node"] for g in j["gpus"]}) == 4 and any(g["ghost_bytes"] for g in j["gpus"]) else 1)' 2>/dev/null; then
    break
  fi
  sleep 0.5
done
set +e
if [ "${1:-}" = top ]; then
  shift
  "$hmn" top --prometheus "http://$prom" "$@"
  exit $?
fi
"$hmn" fits "$@" --prometheus "http://$prom"
status=$?
echo "(exit $status)"
