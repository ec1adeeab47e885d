#!/usr/bin/env bash
# Cross-build the library's unit tests, hmn's Windows integration tests (crates/cli/tests/platform)
# and hmn.exe for x86_64-pc-windows-gnu and run them under Wine. Expects wine64 and gcc-mingw-w64-x86-64.
set -euo pipefail
cd "$(dirname "$0")/../.."
rustup target add x86_64-pc-windows-gnu >/dev/null
export WINEDEBUG=-all
export WINEPREFIX="${WINEPREFIX:-$PWD/target/wineprefix}"
mkdir -p "$WINEPREFIX"
# Wine 8 lacks bcryptprimitives.dll (ProcessPrng), which Rust's std imports: provide it.
x86_64-w64-mingw32-gcc -O2 -shared -o target/bcryptprimitives.dll .ci/wine/bcryptprimitives.c -ladvapi32
wineboot -i >/dev/null 2>&1 || true
cp target/bcryptprimitives.dll "$WINEPREFIX/drive_c/windows/system32/"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
# Tests that know what Wine lacks (GPU counter sets) check it when told they run under it.
export HYPOMNESIS_UNDER_WINE=1
cargo test -p hypomnesis --target x86_64-pc-windows-gnu --all-features --lib -- --nocapture --test-threads=1
cargo test -p hypomnesis-cli --target x86_64-pc-windows-gnu --all-features --test tests -- platform::windows:: \
  --nocapture --test-threads=1
