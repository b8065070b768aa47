#!/usr/bin/env bash
# Sourced by the entry-point scripts: makes `uv` available, installing it from PyPI if missing.
# Needs only python3 (>= 3.10) and access to PyPI; installs into <repo>/.uv-bootstrap, never system-wide.
ab_bootstrap_uv() {
  local root="$1"
  if command -v uv >/dev/null 2>&1; then
    UV_BIN="$(command -v uv)"
    return 0
  fi
  if [ -x "$root/.uv-bootstrap/bin/uv" ]; then
    UV_BIN="$root/.uv-bootstrap/bin/uv"
    return 0
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    echo "error: python3 (>= 3.10) is required to bootstrap uv" >&2
    return 1
  fi
  if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
    echo "error: python3 >= 3.10 is required (found $(python3 --version 2>&1))" >&2
    return 1
  fi
  echo "uv not found: installing it from PyPI into $root/.uv-bootstrap ..." >&2
  if python3 -m venv "$root/.uv-bootstrap" >/dev/null 2>&1 && [ -x "$root/.uv-bootstrap/bin/pip" ]; then
    "$root/.uv-bootstrap/bin/pip" install --quiet uv || { echo "error: pip could not install uv" >&2; return 1; }
  else
    # Debian/Ubuntu without python3-venv: fall back to a --target install with the user's pip.
    rm -rf "$root/.uv-bootstrap"
    python3 -m pip install --quiet --target "$root/.uv-bootstrap/lib" uv \
      || { echo "error: could not install uv (need python3-venv or pip)" >&2; return 1; }
    mkdir -p "$root/.uv-bootstrap/bin"
    ln -sf "$root/.uv-bootstrap/lib/bin/uv" "$root/.uv-bootstrap/bin/uv"
  fi
  UV_BIN="$root/.uv-bootstrap/bin/uv"
  [ -x "$UV_BIN" ] || { echo "error: uv bootstrap failed" >&2; return 1; }
}
