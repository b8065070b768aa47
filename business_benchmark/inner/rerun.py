"""Gate helper: run the FRAMEWORK's business_run.py with the framework's copy of ab_runtime.

    python -E -s rerun.py SCRIPT [business_run.py args...]

SCRIPT is the template rendered by the gate (never the adaptation's copy); the framework's
repository root (the parent of ab_runtime/) is put first on sys.path so `import ab_runtime` cannot pick up the adaptation's.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

RUNTIME_PARENT = Path(__file__).resolve().parents[2]


def main() -> None:
    script, *args = sys.argv[1:]
    sys.path.insert(0, str(RUNTIME_PARENT))
    import ab_runtime

    if Path(ab_runtime.__file__).resolve().parent != (RUNTIME_PARENT / "ab_runtime").resolve():
        raise SystemExit(f"error: ab_runtime resolved to {ab_runtime.__file__}, not the framework's copy")
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
