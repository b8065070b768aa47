"""The benchmark gate: re-verify an adaptation's accuracy_run evidence by execution.

For every evidence set (one metrics file and the outputs and trace it names):
1. the metrics are complete and consistent (benchmark.metrics_check, no torch);
2. the trace is a valid Chrome trace with events (benchmark.trace);
3. the saved outputs reload and the accuracy figures recomputed from them with the framework's
   comparator and the spec's tolerances equal the recorded ones, and a re-execution of sample 0
   with the framework's runtime reproduces the saved inputs, reference and target tensors
   (benchmark/inner, run in the adaptation's interpreter).
The gate passes when every set is consistent and the run in the spec's target dtype exists and
passed accuracy. Other dtypes' accuracy verdicts are reported, not required.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from adaptation.spec import SPEC_FILE
from ascendbridge.runtime.reports import json_report
from benchmark.envs import EnvError, adaptation_python, run_inner
from benchmark.evidence import EvidenceError, EvidenceSet, find_evidence
from benchmark.metrics_check import check_metrics
from benchmark.trace import TraceError, validate_trace

RECOMPUTE_TIMEOUT_S = 600.0


@dataclass
class RunCheck:
    label: str
    metrics_file: str
    consistent: bool
    verdict: Optional[str]  # recorded accuracy verdict, once the figures are verified
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class GateReport:
    adaptation: str
    passed: bool
    summary: str
    runs: list[RunCheck] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def static_problems(ev: EvidenceSet) -> list[str]:
    """Everything that can be checked without torch: figures, trace, outputs file and its hash."""
    problems = check_metrics(ev.metrics)
    trace = ev.named("trace")
    if trace is None:
        problems.append("evidence.trace: not named")
    else:
        try:
            validate_trace(trace)
        except TraceError as exc:
            problems.append(str(exc))
    outputs = ev.named("outputs")
    if outputs is None or not outputs.is_file():
        problems.append(f"outputs file {outputs.name if outputs else '(unnamed)'} not found")
    elif _sha256(outputs) != (ev.metrics.get("evidence") or {}).get("outputs_sha256"):
        problems.append(f"{outputs.name}: sha256 does not match the metrics file (outputs changed or "
                        "truncated after the run)")
    return problems


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recompute(evidence: list[EvidenceSet], spec_path: Path, python: Path) -> dict[str, dict[str, list[str]]]:
    """{"problems", "notes"} per metrics file from recomputing accuracy and re-executing sample 0
    in the adaptation's interpreter (one process for all sets: importing torch dominates)."""
    if not evidence:
        return {}
    result = run_inner(python, "recompute_accuracy.py", [str(spec_path), *(str(ev.metrics_path) for ev in evidence)],
                       cwd=spec_path.parent, timeout_s=RECOMPUTE_TIMEOUT_S)
    parsed = json_report(result.output)
    if parsed is None:
        tail = result.tail(3).replace("\n", " | ")
        why = f"accuracy recomputation did not run (exit {result.exit_code}): {tail}"
        return {ev.metrics_path.name: {"problems": [why], "notes": []} for ev in evidence}
    out = {}
    for ev in evidence:
        entry = parsed.get(ev.metrics_path.name) or {"problems": ["no recomputation result"]}
        out[ev.metrics_path.name] = {"problems": [str(p) for p in entry.get("problems", [])],
                                     "notes": [str(n) for n in entry.get("notes", [])]}
    return out


def check_adaptation(adaptation_dir: Path, python_override: Optional[str] = None) -> GateReport:
    """The full gate for one adaptation directory; never raises for bad evidence."""
    adaptation_dir = Path(adaptation_dir)
    name = adaptation_dir.name
    spec_path = adaptation_dir / SPEC_FILE
    try:
        spec = json.loads(spec_path.read_text())
        target_dtype = str((spec.get("dtype") or {}).get("target") or "float32")
    except (OSError, json.JSONDecodeError, AttributeError):
        return GateReport(name, False, f"{SPEC_FILE} missing or unreadable in {adaptation_dir}")
    try:
        evidence = find_evidence(adaptation_dir)
    except EvidenceError as exc:
        return GateReport(name, False, str(exc))
    if not evidence:
        return GateReport(name, False, "no benchmark_metrics_*.json: accuracy_run.py has not produced evidence")
    try:
        python = adaptation_python(adaptation_dir, python_override)
    except EnvError as exc:
        return GateReport(name, False, str(exc))
    static = {ev.metrics_path.name: static_problems(ev) for ev in evidence}
    # Tensors are loaded only for sets whose static checks pass: a bad set already fails.
    recomputed = recompute([ev for ev in evidence if not static[ev.metrics_path.name]], spec_path, python)
    runs = []
    for ev in evidence:
        rerun = recomputed.get(ev.metrics_path.name, {"problems": [], "notes": []})
        problems = static[ev.metrics_path.name] + rerun["problems"]
        verdict = (ev.metrics.get("accuracy") or {}).get("verdict") if not problems else None
        runs.append(RunCheck(ev.label, ev.metrics_path.name, not problems, verdict, problems, rerun["notes"]))
    bad = [r for r in runs if not r.consistent]
    primary = [r for ev, r in zip(evidence, runs) if ev.run.get("dtype") == target_dtype]
    if bad:
        first = bad[0]
        summary = f"{len(bad)} of {len(runs)} evidence set(s) failed: {first.metrics_file}: {first.problems[0]}"
    elif not primary:
        summary = f"no evidence for the spec's target dtype {target_dtype}"
    elif not any(r.verdict == "pass" for r in primary):
        summary = f"accuracy failed in the target dtype {target_dtype} ({primary[0].label})"
    else:
        verdicts = ", ".join(f"{r.label}: {r.verdict}" for r in runs)
        return GateReport(name, True, f"{len(runs)} evidence set(s) verified ({verdicts})", runs)
    return GateReport(name, False, summary, runs)
