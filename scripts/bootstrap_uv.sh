#!/usr/bin/env bash
# Sourced by the entry-point scripts: makes `uv` available, installing it from PyPI if missing.
# Needs only python3 (>= 3.10) and access to PyPI; installs into <repo>/.uv-bootstrap, never system-wide.
# After ab_bootstrap_uv, UV_BIN is the uv to use and its directory leads PATH, so the processes
# the entry points start (watchdog -> team lead -> gates) find the same uv.
ab_bootstrap_uv() {
  _ab_find_uv "$1" || return 1
  PATH="$(dirname "$UV_BIN"):$PATH"
  export PATH UV_BIN
}

# Exports the variables of <repo>/.env when it exists (docs/settings.md).
ab_load_env() {
  if [[ -f "$1/.env" ]]; then
    set -a
    # shellcheck disable=SC1091
    source "$1/.env"
    set +a
  fi
}

# The preamble the repository's entry points share: work from the repository, uv available,
# ./.env loaded.
ab_entry_point() {
  cd "$1"
  ab_bootstrap_uv "$1"
  ab_load_env "$1"
}

# Syncs the framework environment from uv.lock through the site's package sources (pip's mirror
# configuration or ASCENDBRIDGE_WHEELHOUSE: ascendbridge/pip_site.py, standard library only).
# Arguments go to `uv sync --locked`. Entry points then start with `uv run --no-sync`.
ab_sync_framework() {
  local root="$1"
  shift
  if command -v python3 >/dev/null 2>&1; then
    UV_BIN="$UV_BIN" python3 -I "$root/ascendbridge/pip_site.py" sync "$@"
  else
    "$UV_BIN" sync --locked "$@"
  fi
}

_ab_find_uv() {
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
