# Sourced by the scripts in this folder. Makes the repository root the working directory and
# exports CARGO_TARGET_DIR as the absolute path of cargo's target directory, as cargo itself
# resolves it (CARGO_TARGET_DIR relative to where the script was started, build.target-dir in a
# cargo config, or <root>/target), so a script works from any directory with any target setting.
# Without cargo (a GPU host given prebuilt binaries) CARGO_TARGET_DIR or <root>/target is used.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
