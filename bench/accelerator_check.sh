#!/usr/bin/env bash
# Accelerator check: demo models in system mode on a preinstalled Python with torch (no uv, no network).
#   bench/accelerator_check.sh [--device cuda|cpu] [--out DIR] [--models a,b,c]
# PYTHON (default python3) must have torch, transformers, pydantic, pydantic-settings, sqlmodel, jinja2,
# packaging and psutil.
# Renders the packages, makes each environment in system mode on that interpreter, runs the dry run,
# the benchmark, the optimization search and (causal LMs) training, and writes accelerator_check.{json,md}; 10-minute limit.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
LIMIT_S="${ACCELERATOR_CHECK_LIMIT_S:-600}"
missing=$("$PYTHON" - <<'PY'
import importlib.util
print(" ".join(m for m in ("torch", "transformers", "pydantic", "pydantic_settings", "sqlmodel", "jinja2", "packaging", "psutil") if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  echo "error: $PYTHON lacks: $missing (the check installs nothing)" >&2
  exit 2
fi
export ASCENDBRIDGE_WHEEL_DIR=none HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The driver keeps to the limit itself (and still writes its report); timeout is the backstop.
exec timeout --signal=TERM --kill-after=20 "$((LIMIT_S + 30))" "$PYTHON" -u bench/accelerator_check.py --limit-s "$LIMIT_S" "$@"
