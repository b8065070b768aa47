#!/usr/bin/env bash
# One team-lead run over the board (see docs/teamlead.md for flags and exit codes).
#   PROMPT_MODE=adaptation|benchmark|optimization|business|quantization|serving|all (default all), or --stages a,b
#   --once (default) | --forever, --workers N, --stage-workers stage=N,...
# Works without uv on PATH (bootstraps it like run_main_job.sh). Single instance per board
# (exit 4 if another team lead runs); loads ./.env when present.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/bootstrap_uv.sh
source "$ROOT/scripts/bootstrap_uv.sh"
ab_entry_point "$ROOT"
ab_sync_framework "$ROOT" --inexact --quiet  # keeps the extras a test run installed
exec "$UV_BIN" run --no-sync --quiet python -m ascendbridge.teamlead "$@"
