#!/usr/bin/env bash
# Run the test suite: bootstraps uv if missing, syncs the framework environment from uv.lock,
# with the ray extra (the Ray executor's tests run a real local Ray cluster) and the datasets extra
# (a training job's `hf:` corpus is loaded with it), then runs pytest.
# Extra arguments go to pytest (e.g. ./run_tests.sh tests/board -x).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
# shellcheck source=scripts/bootstrap_uv.sh
source "$ROOT/scripts/bootstrap_uv.sh"
ab_bootstrap_uv "$ROOT"
"$UV_BIN" sync --locked --extra ray --extra datasets --quiet
exec "$UV_BIN" run --locked --extra ray --extra datasets pytest "$@"
