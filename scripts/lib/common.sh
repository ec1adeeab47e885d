# Sourced by every shell script under scripts/. Makes the repository root the working directory and
# exports CARGO_TARGET_DIR as the absolute path of cargo's target directory, as cargo itself
# resolves it (CARGO_TARGET_DIR relative to where the script was started, build.target-dir in a
# cargo config, or <root>/target), so a script works from any directory with any target setting.
# Without cargo (a GPU host given prebuilt binaries) CARGO_TARGET_DIR or <root>/target is used.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if command -v cargo >/dev/null 2>&1; then
  CARGO_TARGET_DIR="$(cargo metadata --format-version 1 --no-deps --manifest-path "$ROOT/Cargo.toml" \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  if [ -z "$CARGO_TARGET_DIR" ]; then
    echo "$(basename "$0"): cargo metadata did not name a target directory" >&2
    exit 1
  fi
else
  case "${CARGO_TARGET_DIR:-}" in
    "") CARGO_TARGET_DIR="$ROOT/target" ;;
    /*) ;;
    *) CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
  esac
fi
export CARGO_TARGET_DIR
cd "$ROOT"

# The one place scripts build the fake NVML: `<target dir>/fake-builds/<variant>/libnvidia-ml.so.1`,
# where the workspace's tests (crates/testkit) build it too. Prints the library's path.
# Usage: fake_nvml [modern]   (the default variant, R510+; the tests' other variants have
# their own folders).
fake_nvml() {
  local dir="$CARGO_TARGET_DIR/fake-builds/${1:-modern}"
  cargo build -q -p fake-nvml --target-dir "$dir" >&2
  # A new name renamed over the old: a process that has the library loaded keeps its copy.
  cp "$dir/debug/libnvidia_ml.so" "$dir/libnvidia-ml.so.1.tmp$$"
  mv -f "$dir/libnvidia-ml.so.1.tmp$$" "$dir/libnvidia-ml.so.1"
  printf '%s\n' "$dir/libnvidia-ml.so.1"
}
