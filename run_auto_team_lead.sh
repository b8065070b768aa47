#!/usr/bin/env bash
# One team-lead run over the board (see docs/teamlead.md for flags and exit codes).
#   PROMPT_MODE=adaptation|benchmark|optimization|business|all (default all), or --stages a,b
#   --once (default) | --forever, --workers N, --stage-workers stage=N,...
# Single instance per board (exit 4 if another team lead runs); loads ./.env when present.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -f .env ]]; then
  set -a
  # shellcheck disable=SC1091
  source ./.env
  set +a
fi
exec uv run --quiet python -m ascendbridge.teamlead "$@"
