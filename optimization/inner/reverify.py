"""Gate helper: re-measure baseline vs the chosen passes, paired and interleaved, with the
framework's copy of the runtime and its one harness (not the adaptation's), in the adaptation's
interpreter, until the gate's rule decides (ab_runtime/optimize/quick.py gate_verdict).

    python reverify.py [--workload=NAME] [--claimed-low=X] [--recompute=PERF_METRICS_JSON] RUNTIME_PARENT
        SPEC_JSON DEVICE MODE MAX_PAIRS ITERS WARMUP CLAIMED MIN_GAIN PASS...

(--workload: the workload whose headline call the optimizer timed, from the notes' settings;
CLAIMED: the notes' confirmed speedup, --claimed-low the low end of its interval; pairs are taken
one at a time, at least 5, at most MAX_PAIRS, until passed / failed is decided, else inconclusive
at MAX_PAIRS. --recompute: first the benchmark gate's recomputation of that perf evidence
(ascendbridge/gatekit/inner/recompute_accuracy.py: its accuracy from the saved outputs, sample 0
re-executed with the passes), in this same process, and the pairs only when it holds: one torch
import and one compile of the chosen configuration where two processes cost two, the second
build finding the first's compiled graphs: tiny-llama32's perf gate 22.6 s instead of 42.9 s on
a loaded 2-core host, 2026-12-07.)

Prints one JSON object: speedup, interval, medians, pair speedups, verdict and why (or {"error": ...}),
and under "recompute" the recomputation's result as recompute_accuracy.py prints it.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

GATEKIT_INNER = Path(__file__).resolve().parents[2] / "ascendbridge" / "gatekit" / "inner"


def recomputed(metrics: Path, spec: Path) -> dict[str, Any]:
    """The benchmark gate's recomputation of one perf evidence file, keyed by its name as
    recompute_accuracy.py prints it; the re-execution's model is freed before the pairs."""
    sys.path.insert(0, str(GATEKIT_INNER))
    from recompute_accuracy import check  # the gate kit's helper, beside its _framework loader

    result = {metrics.name: check(metrics, spec)}
    gc.collect()
    return result


def main(argv: list[str]) -> int:
    options: dict[str, str] = {}
    while argv and argv[0].startswith("--") and "=" in argv[0]:
        key, value = argv[0][2:].split("=", 1)
        options[key], argv = value, argv[1:]
    workload = options.get("workload") or None
    claimed_low = float(options["claimed-low"]) if options.get("claimed-low") else None
    if len(argv) < 9:
        print(
            json.dumps(
                {
                    "error": "usage: reverify.py RUNTIME_PARENT SPEC DEVICE MODE MAX_PAIRS ITERS WARMUP CLAIMED "
                    "MIN_GAIN PASS..."
                }
            )
        )
        return 2
    sys.path.insert(0, argv[0])
    from ab_runtime import harness
    from ab_runtime.optimize import passes, quick
    from ab_runtime.optimize.optimize import sequential_against_baseline

    spec, device, mode = argv[1], argv[2], argv[3]
    pairs, iters, warmup, names = int(argv[4]), int(argv[5]), int(argv[6]), argv[9:]
    claimed, min_gain = float(argv[7]), float(argv[8])

    def decided(speedups: list[float]) -> bool:
        return quick.gate_verdict(speedups, claimed, min_gain, pairs, claimed_low)[0] != "continue"

    checked = recomputed(Path(options["recompute"]), Path(spec)) if options.get("recompute") else {}
    if checked and not all(r["ok"] for r in checked.values()):
        print(json.dumps({"recompute": checked}))  # no pairs for evidence that does not hold
        return 0
    try:
        session = harness.open_session(
            Path(spec), device, use_pretrained=mode == "pretrained", num_samples=1, workload=workload
        )
        figures = sequential_against_baseline(session, passes.get(names), pairs, warmup, iters, decided)
    except Exception as exc:  # reported as one line; the gate fails on it
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        print(json.dumps({"error": error, **({"recompute": checked} if checked else {})}))
        return 1
    verdict, why = quick.gate_verdict(figures["pair_speedups"], claimed, min_gain, pairs, claimed_low)
    print(
        json.dumps(
            {
                **{k: v for k, v in figures.items() if not k.endswith("_samples_ms")},
                "verdict": verdict,
                "why": why,
                **({"recompute": checked} if checked else {}),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
