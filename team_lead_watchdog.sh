#!/usr/bin/env bash
# Keep the team lead alive: restart on exit or stale board heartbeat, with backoff.
#   ./team_lead_watchdog.sh [--stale-after S] [--check-every S] [--max-restarts N] [-- TEAM-LEAD ARGS]
# Loads ./.env when present. Stop it with SIGTERM (or Ctrl-C): it stops the team lead it started.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -f .env ]]; then
  set -a
  # shellcheck disable=SC1091
  source ./.env
  set +a
fi
exec uv run --quiet python -m ascendbridge.teamlead.watchdog "$@"
