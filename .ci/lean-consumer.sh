#!/usr/bin/env bash
# A program that depends on the library as a user writes it (`hypomnesis = { path = … }`, default
# features) must pull at most MAX crates, itself and the library included, as `cargo tree -e normal`
# counts them for the Linux target. Usage: .ci/lean-consumer.sh [MAX]   (default 20)
# With BUILD=1 it also builds the program from cold in release mode and prints the time taken.
set -euo pipefail
cd "$(dirname "$0")/.."
max="${1:-20}"
dir="$PWD/target/lean-consumer"
rm -rf "$dir"
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "lean-consumer"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
hypomnesis = { path = "$PWD/crates/hypomnesis" }

[workspace]
TOML
cat > "$dir/src/main.rs" <<'RS'
fn main() {
    match hypomnesis::process_rss() {
        Ok(rss) => println!("RSS {} MiB", rss >> 20),
        Err(e) => eprintln!("{e}"),
    }
}
RS
# The workspace's lock file, so the versions are the ones the project tests.
cp Cargo.lock "$dir/Cargo.lock"
tree="$(cargo tree --manifest-path "$dir/Cargo.toml" -e normal --prefix none \
  --target x86_64-unknown-linux-gnu | sed 's/ (\*)$//' | sort -u)"
n="$(printf '%s\n' "$tree" | grep -c .)"
printf '%s\n' "$tree"
echo "lean-consumer: $n crates with default features (at most $max)"
if [ "${BUILD:-}" = 1 ]; then
  start=$(date +%s.%N)
  CARGO_TARGET_DIR="$dir/target" cargo build --release --manifest-path "$dir/Cargo.toml" -q
  echo "lean-consumer: cold release build in $(echo "$(date +%s.%N) - $start" | bc) s"
fi
[ "$n" -le "$max" ] || { echo "the library's default features pull $n crates, more than $max"; exit 1; }
