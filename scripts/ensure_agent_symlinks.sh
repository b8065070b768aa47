#!/usr/bin/env bash
# Restore the links that let every agent CLI find the project context and the role files:
#   AGENTS.md -> CLAUDE.md   (Codex and other AGENTS.md readers)
#   .agents   -> .claude     (role files and agent memory under one name)
# Idempotent; refuses to replace a real file or directory that is in the way.
set -euo pipefail
cd "$(dirname "$0")/.."

ensure_link() {
  local link="$1" target="$2"
  if [[ -L "$link" ]]; then
    if [[ "$(readlink "$link")" == "$target" ]]; then
      echo "ok: $link -> $target"
      return 0
    fi
    rm -- "$link"
  elif [[ -e "$link" ]]; then
    echo "error: $link exists and is not a link; move it away and run again" >&2
    return 1
  fi
  ln -s -- "$target" "$link"
  echo "linked: $link -> $target"
}

status=0
ensure_link AGENTS.md CLAUDE.md || status=1
ensure_link .agents .claude || status=1
exit "$status"
