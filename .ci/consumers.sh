#!/usr/bin/env bash
# The published projects that use hypomnesis build against this library, unchanged.
#
# For each consumer: its source at a pinned version, fetched by cargo (which checks its checksum
# against the registry's index), its Cargo.lock removed, a [patch.crates-io]
# pointing hypomnesis at crates/hypomnesis added (and a [workspace] of its own, since target/ is
# inside this repository's workspace). Then: the patch is what the build uses (`cargo tree -i
# hypomnesis` names the path, the lock file has no registry source for it, and cargo does not
# say the patch went unused), the published crate is never downloaded (no hypomnesis .crate
# in cargo's cache, before or after), and the consumer's own check or tests pass:
#   - candle-mi 0.2.2: `cargo check --no-default-features --features memory,transformer`
#   - hf-fetch-model 0.12.6: its GPU-check unit tests (`cargo test --features cli --bin hf-fm
#     gpu_check::`), which use device_info, GpuDeviceInfo's builder (test-helpers),
#     HypomnesisError's variants and is_spill_measurable.
# Usage: .ci/consumers.sh [--fetch-only]
#   --fetch-only  only fetch the sources and every crate their builds need, and stop (what
#                 .ci/run does in the background while it compiles; the full run that follows
#                 then builds from cargo's cache)
set -euo pipefail
cd "$(dirname "$0")/.."
fetch_only=0
case "${1:-}" in
  '') ;;
  --fetch-only) fetch_only=1 ;;
  *) echo "consumers: unknown argument '$1' (the one option is --fetch-only)"; exit 2 ;;
esac
repo="$PWD"
lib="$repo/crates/hypomnesis"
work="$repo/target/consumers"
# CONSUMERS_TARGET_DIR: where they build (default target/consumers/target; .ci/run gives the
# workspace's own target/, so that the crates they share with it are built once).
export CARGO_TARGET_DIR="${CONSUMERS_TARGET_DIR:-$work/target}"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
mkdir -p "$work"

published_crates() {
  # Any copy of the published hypomnesis in cargo's download cache or unpacked sources.
  find "$cargo_home/registry" -maxdepth 3 -name 'hypomnesis-*' 2>/dev/null || true
}

before="$(published_crates)"
if [ -n "$before" ]; then
  echo "the published hypomnesis is in cargo's cache already (it must never be downloaded):"
  echo "$before"
  exit 1
fi

# fetch NAME VERSION: the crate's source, fresh, under $work/src/NAME-VERSION. Cargo fetches it
# (from the registry cargo is configured with, checking its checksum against the index) for a
# throwaway package that depends on exactly that version, with hypomnesis patched to this
# repository's: so cargo never fetches the published hypomnesis. The unpacked source is copied
# from cargo's registry cache.
fetch() {
  local name="$1" version="$2"
  local getter="$work/fetch-$name-$version"
  rm -rf "$getter"
  mkdir -p "$getter/src"
  : > "$getter/src/lib.rs"
  cat > "$getter/Cargo.toml" <<TOML
[package]
name = "fetch-consumer"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$name = "=$version"

[patch.crates-io]
hypomnesis = { path = "$lib" }

[workspace]
TOML
  (cd "$getter" && cargo fetch -q) >&2
  local unpacked
  unpacked="$(find "$cargo_home/registry/src" -mindepth 2 -maxdepth 2 -type d -name "$name-$version" | head -1)"
  if [ -z "$unpacked" ] || [ ! -f "$unpacked/Cargo.toml" ]; then
    echo "cargo fetch did not unpack $name $version under $cargo_home/registry/src"
    exit 1
  fi
  rm -rf "$work/src/$name-$version"
  mkdir -p "$work/src"
  cp -R "$unpacked" "$work/src/$name-$version"
  local dir="$work/src/$name-$version"
  rm -f "$dir/Cargo.lock"
  if grep -q '^\[workspace\]' "$dir/Cargo.toml"; then
    echo "$name $version has a [workspace] of its own: the patch below would not be its root's"
    exit 1
  fi
  cat >> "$dir/Cargo.toml" <<TOML

# Added by hypomnesis's .ci/consumers.sh: build against the library of this repository.
[patch.crates-io]
hypomnesis = { path = "$lib" }

[workspace]
TOML
  echo "$dir"
}

# uses_the_path DIR CARGO-ARGS...: the patched library is the one in the graph.
uses_the_path() {
  local dir="$1"
  shift
  local tree said
  said="$(cd "$dir" && cargo generate-lockfile 2>&1)"
  tree="$(cd "$dir" && cargo tree -i hypomnesis -e normal,dev "$@" 2>>"$work/tree.stderr")"
  echo "$tree" | head -3
  if ! echo "$tree" | head -1 | grep -qF "hypomnesis v" || ! echo "$tree" | head -1 | grep -qF "($lib)"; then
    echo "cargo tree does not show hypomnesis from $lib:"
    echo "$tree"
    exit 1
  fi
  if echo "$said" | grep -q "was not used in the crate graph"; then
    echo "cargo says the patch is not used:"
    echo "$said"
    exit 1
  fi
  # The lock file's hypomnesis has no registry source: it is the path.
  if awk '/^\[\[package\]\]/{p=0} /^name = "hypomnesis"$/{p=1} p && /^source = /{found=1} END{exit !found}' \
      "$dir/Cargo.lock"; then
    echo "Cargo.lock takes hypomnesis from a registry"
    exit 1
  fi
}

if [ "$fetch_only" = 1 ]; then
  for consumer in candle-mi:0.2.2 hf-fetch-model:0.12.6; do
    dir="$(fetch "${consumer%%:*}" "${consumer##*:}" | tail -1)"
    (cd "$dir" && cargo generate-lockfile -q && cargo fetch -q)
    echo "fetched ${consumer%%:*} ${consumer##*:} and the crates it builds with"
  done
  after="$(published_crates)"
  if [ -n "$after" ]; then
    echo "the published hypomnesis was downloaded:"
    echo "$after"
    exit 1
  fi
  exit 0
fi

echo "--- candle-mi 0.2.2 (feature memory: Snapshot::now, process_rss, Snapshot's fields)"
dir="$(fetch candle-mi 0.2.2 | tail -1)"
uses_the_path "$dir" --no-default-features --features memory,transformer
(cd "$dir" && cargo check -q --no-default-features --features memory,transformer)
echo "candle-mi 0.2.2 builds against $lib"

echo "--- hf-fetch-model 0.12.6 (feature cli: device_info, GpuDeviceInfo, errors, is_spill_measurable)"
dir="$(fetch hf-fetch-model 0.12.6 | tail -1)"
uses_the_path "$dir" --features cli
out="$(cd "$dir" && cargo test -q --features cli --bin hf-fm gpu_check:: 2>&1)" || {
  echo "$out"
  exit 1
}
echo "$out" | grep -E '^test result:'
passed="$(echo "$out" | sed -nE 's/^test result: ok\. ([0-9]+) passed.*/\1/p' | head -1)"
if [ -z "$passed" ] || [ "$passed" -lt 20 ]; then
  echo "expected hf-fetch-model's GPU-check tests (over 20) to run and pass; got: ${passed:-none}"
  exit 1
fi
echo "hf-fetch-model 0.12.6: $passed GPU-check tests pass against $lib"

after="$(published_crates)"
if [ -n "$after" ]; then
  echo "the published hypomnesis was downloaded:"
  echo "$after"
  exit 1
fi
echo "the published hypomnesis was never downloaded"
