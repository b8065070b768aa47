#!/usr/bin/env bash
# Keep the team lead alive: restart on exit or stale board heartbeat, with backoff.
#   ./team_lead_watchdog.sh [--stale-after S] [--check-every S] [--max-restarts N] [-- TEAM-LEAD ARGS]
# Loads ./.env when present. Stop it with SIGTERM (or Ctrl-C): it stops the team lead it started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/bootstrap_uv.sh
source "$ROOT/scripts/bootstrap_uv.sh"
ab_entry_point "$ROOT"
ab_sync_framework "$ROOT" --inexact --quiet  # keeps the extras a test run installed
exec "$UV_BIN" run --no-sync --quiet python -m ascendbridge.teamlead.watchdog "$@"
