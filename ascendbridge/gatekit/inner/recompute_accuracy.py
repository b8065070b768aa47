"""Gate helper: reload a run's saved outputs, recompute its accuracy figures, compare them.

Run in the adaptation's interpreter:
`python recompute_accuracy.py [--latency-band X] SPEC_JSON METRICS_JSON...` (one process for all
of an adaptation's runs: importing torch is the expensive part). Prints one JSON object mapping
each metrics file name to {"ok", "problems", "notes", "undecided", "timings", "recomputed_verdict",
"outputs_checked", "remeasured_timing"}. After the figures match, sample 0 is re-executed
(reexecute.py, the run's passes applied) to show the saved inputs, reference and target tensors
come from really running that configuration, and the target is re-timed with the same harness
beside the calibration probe; with --latency-band the re-timed figures are judged
(ab_runtime/calibration.py): a failure is a problem, a timing the host's load left undecided is
`undecided`. Without it (the optimization gate) nothing is judged and one round is timed.
Thresholds come from the framework's accuracy standard (the spec's `tolerances` only request
bounded changes), not from the metrics file, so loosening the thresholds recorded in the metrics
file is itself a mismatch. Perf evidence (`perf_*` files: an optimized configuration) is judged by
the optimization budget against the float32 reference (comparator.judge_optimized).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _framework import framework_module
from reexecute import reexecute


def check(metrics_path: Path, spec_path: Path, band: float = float("inf")) -> dict[str, Any]:
    import torch

    comparator = framework_module("comparator")
    metrics = json.loads(metrics_path.read_text())
    spec = json.loads(spec_path.read_text())
    evidence = metrics.get("evidence") or {}
    outputs_path = metrics_path.parent / str(evidence.get("outputs", ""))
    if not outputs_path.is_file():
        return {"ok": False, "problems": [f"outputs file {outputs_path.name} not found"]}
    if framework_module("fileops").sha256_file(outputs_path) != evidence.get("outputs_sha256"):
        return {
            "ok": False,
            "problems": [
                f"{outputs_path.name}: sha256 does not match the metrics file "
                "(outputs changed or truncated after the run)"
            ],
        }
    try:
        saved = torch.load(outputs_path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unreadable file is a failed check, reported in one line
        return {"ok": False, "problems": [f"{outputs_path.name}: cannot be loaded ({exc.__class__.__name__})"]}
    if not isinstance(saved, dict) or saved.get("format") != "ascendbridge.outputs/1":
        return {"ok": False, "problems": [f"{outputs_path.name}: not an AscendBridge outputs file"]}
    run = metrics.get("run") or {}
    problems = []
    for key in ("device", "dtype"):
        if saved.get(key) != run.get(key):
            problems.append(f"outputs file says {key}={saved.get(key)!r}, metrics say {run.get(key)!r}")
    if metrics_path.name.startswith("perf_"):
        recomputed = comparator.judge_optimized(
            saved["target"],
            saved["reference"],
            str(spec.get("task_family")),
            str(saved.get("dtype")),
            spec.get("tolerances"),
        )
    else:
        thresholds = comparator.Thresholds.from_spec(spec.get("tolerances"), str(spec.get("task_family") or "*"))
        recomputed = comparator.compare_outputs(
            saved["target"], saved["reference"], thresholds, str(saved.get("dtype")), saved.get("reference_fp64")
        )
    recorded = metrics.get("accuracy")
    differences = framework_module("figures").recorded_differences(recorded, recomputed, "accuracy")
    if differences:
        problems.append(
            "accuracy figures in the metrics file do not match the figures recomputed "
            f"from the saved outputs (first at {differences[0]})"
        )
    again: dict[str, Any] = {"notes": [], "undecided": [], "timings": [], "remeasured": None}
    recorded_passes = (metrics.get("optimization") or {}).get("passes") or []
    if sorted(saved.get("passes") or []) != sorted(recorded_passes):
        problems.append(f"outputs file says passes {saved.get('passes')}, metrics say {recorded_passes}")
    if not problems:
        try:
            again = reexecute(spec_path, run, saved, metrics, band)
        except Exception as exc:  # the evidence cannot be reproduced at all: that is the finding
            again["problems"] = [
                f"re-execution failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ]
        problems += again["problems"]
    return {
        "ok": not problems and not again["undecided"],
        "problems": problems,
        "notes": again["notes"],
        "undecided": again["undecided"],
        "timings": again["timings"],
        "recomputed_verdict": recomputed["verdict"],
        "outputs_checked": sorted(recomputed["outputs"]),
        "remeasured_timing": again["remeasured"],
    }


def main(argv: list[str]) -> int:
    band = float("inf")  # --latency-band X: judge the re-timed figures within X (ab_runtime/calibration.py)
    if argv[:1] == ["--latency-band"] and len(argv) > 1:
        band, argv = float(argv[1]), argv[2:]
    if len(argv) < 2:
        print("usage: recompute_accuracy.py [--latency-band X] SPEC_JSON METRICS_JSON...", file=sys.stderr)
        return 2
    spec = Path(argv[0])
    results = {Path(m).name: check(Path(m), spec, band) for m in argv[1:]}
    print(json.dumps(results))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
