"""Gate helper: re-measure baseline vs the chosen passes, paired and interleaved, with the
framework's copy of the runtime and its one harness (not the adaptation's), in the adaptation's
interpreter.

    python reverify.py [--workload=NAME] RUNTIME_PARENT SPEC_JSON DEVICE MODE PAIRS ITERS WARMUP PASS...

(--workload: the workload whose headline call the optimizer timed, from the notes' settings.)

Prints one JSON object: speedup, interval, medians (or {"error": ...}).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    workload = None
    if argv and argv[0].startswith("--workload="):
        workload, argv = argv[0].split("=", 1)[1] or None, argv[1:]
    if len(argv) < 7:
        print(json.dumps({"error": "usage: reverify.py RUNTIME_PARENT SPEC DEVICE MODE PAIRS ITERS WARMUP PASS..."}))
        return 2
    sys.path.insert(0, argv[0])
    from ab_runtime import harness
    from ab_runtime.optimize import passes

    spec, device, mode = argv[1], argv[2], argv[3]
    pairs, iters, warmup, names = int(argv[4]), int(argv[5]), int(argv[6]), argv[7:]
    try:
        session = harness.open_session(Path(spec), device, use_pretrained=mode == "pretrained", num_samples=1,
                                       workload=workload)
        figures = harness.paired_against_baseline(session, passes.get(names), pairs, warmup, iters)
    except Exception as exc:  # reported as one line; the gate fails on it
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}))
        return 1
    print(json.dumps({k: v for k, v in figures.items() if not k.endswith("_samples_ms")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
