#!/usr/bin/env bash
# The main job: bootstraps uv if missing, syncs the framework environment from uv.lock, then
# takes the bundled offline demo models through the whole gated pipeline (see README.md).
# Arguments go to ascendbridge.main_job (--help lists them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/bootstrap_uv.sh
source "$ROOT/scripts/bootstrap_uv.sh"
ab_entry_point "$ROOT"
ab_sync_framework "$ROOT" --quiet
exec "$UV_BIN" run --no-sync python -m ascendbridge.main_job "$@"
