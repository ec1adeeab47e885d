#!/usr/bin/env bash
# How much `hmn run` costs a command that writes a great deal: 1 GiB of output (a serving
# engine's log lines, one in 4,096 a line the engine table matches) passed through `hmn run`
# and read on the way, against the same command without hmn. Both write into a pipe (`| cat
# >/dev/null`), as a command's output goes to a terminal, a file or a log collector: the pipe
# hop hmn adds is in the figure, not hidden by /dev/null's free writes.
# Producers: `cat` of a file in the page cache (the fastest writer there is: the worst case
# for hmn), and a Python program that formats its lines as it writes (closer to an engine).
# Usage: scripts/bench/run_output.sh [SIZE_MIB] [RUNS]   (default 1024 and 5; needs
# farm-bench on PATH, which prints min, median and max, and the ratio pair by pair).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
size_mib="${1:-1024}"
runs="${2:-5}"
cargo build -q --release --bin hmn
hmn="$CARGO_TARGET_DIR/release/hmn"
dir="$(mktemp -d "${TMPDIR:-/tmp}/hmn-run-output.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/produce.py" <<'EOF'
import sys
size = int(sys.argv[1]) << 20
out = sys.stdout.buffer
n = 0
i = 0
while n < size:
    lines = []
    for _ in range(512):
        i += 1
        if i % 4096 == 0:
            lines.append(b"(EngineCore pid=4242) INFO 12-06 10:11:12 [gpu_worker.py:436] Available KV cache memory: %d.%02d GiB\n" % (i % 97, i % 100))
        else:
            lines.append(b"(APIServer pid=4241) INFO 12-06 10:11:12 [loggers.py:123] Engine 000: Avg prompt throughput: %d.%d tokens/s, Avg generation throughput: %d.%d tokens/s, Running: %d reqs, GPU KV cache usage: %d.%d%%\n" % (i % 5000, i % 10, i % 700, i % 10, i % 64, i % 100, i % 10))
    block = b"".join(lines)
    out.write(block)
    n += len(block)
EOF
python3 "$dir/produce.py" "$size_mib" > "$dir/log.txt"
echo "$(du -h "$dir/log.txt" | cut -f1) of log lines in $dir/log.txt; hmn: $hmn"
echo "== cat of the file: through hmn run (A) against plain (B)"
farm-bench -n "$runs" --timeout 900 \
  --vs "sh -c 'cat $dir/log.txt | cat >/dev/null'" \
  -- sh -c "$hmn run -- cat $dir/log.txt 2>/dev/null | cat >/dev/null"
echo "== a Python program formatting the lines as it writes: through hmn run (A) against plain (B)"
farm-bench -n "$runs" --timeout 900 \
  --vs "sh -c 'python3 $dir/produce.py $size_mib | cat >/dev/null'" \
  -- sh -c "$hmn run -- python3 $dir/produce.py $size_mib 2>/dev/null | cat >/dev/null"
