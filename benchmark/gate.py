"""The benchmark gate: re-verify an adaptation's accuracy_run evidence by execution.

First, before anything in the directory is trusted: accuracy_run.py must be byte-identical to what
the generator renders from the spec and ab_runtime/ to the framework's copy (ascendbridge.gatekit.integrity).
Then, for every evidence set (one metrics file and the outputs and trace it names):
1. the metrics are complete and consistent (ascendbridge.gatekit.metrics_check, no torch);
2. the trace is a valid Chrome trace with events (ascendbridge.gatekit.trace);
3. the saved outputs reload and the accuracy figures recomputed from them with the framework's
   comparator and the framework's accuracy standard (the spec's `tolerances` only request bounded
   changes; each is reported as a decision) equal the recorded ones, and a re-execution of sample 0
   with the framework's runtime reproduces the saved inputs, reference and target tensors
   (ascendbridge/gatekit/inner, run in the adaptation's interpreter);
4. the target's latency and the workload's headline (fastest decode step, or the sweep knee's
   fastest call), re-timed there with the same harness, each call followed by the fixed
   calibration probe the run also timed (ab_runtime/calibration.py): passed when the gate's
   fastest call or its model/probe ratio is within the latency band (x1.5,
   `ASCENDBRIDGE_LATENCY_BAND`) of the reported one; failed when a call no context switch
   interrupted is beyond the hard bound x4 and so is its slowdown over the probe's beside it (the
   load rule: a figure the host's load explains is never failed), or, on an idle host (other
   processes' CPU use read from /proc/stat), when the probe is beyond x4 or the figure outside the
   band in steady, unpreempted rounds with the run's probe reproduced; otherwise inconclusive
   (exit 3): the host's load left it undecided, and the team lead re-runs the gate. Evidence
   without a calibration block is judged the same way without the probe (beyond x4: idle host only).
The gate passes when every set is consistent and the run in the spec's target dtype exists and
passed accuracy; it is inconclusive when that holds except for timing checks left undecided.
Other dtypes' accuracy verdicts are reported, not required.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

from pydantic.dataclasses import dataclass

from ab_runtime import accuracy_standard
from ab_runtime.fileops import sha256_file
from ab_runtime.metrics_file import MetricsFile, find_metrics
from ascendbridge.gatekit.checker import json_report
from ascendbridge.gatekit.envs import EnvError, adaptation_python, run_inner
from ascendbridge.gatekit.evidence import EvidenceError
from ascendbridge.gatekit.integrity import code_problems
from ascendbridge.gatekit.metrics_check import check_metrics
from ascendbridge.gatekit.placement import apply_recorded_placement
from ascendbridge.gatekit.report import EvidenceCheck, GateReport, untrusted_summary
from ascendbridge.gatekit.trace import TraceError, validate_trace
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec
from ascendbridge.settings import section
from benchmark.op_coverage import evidence_check
from benchmark.render import ACCURACY_RUN, render_accuracy_run_text
from benchmark.settings import BenchmarkSettings

RECOMPUTE_TIMEOUT_S = 600.0
LATENCY_BAND = 1.5  # a reported timing may be at most this much faster than the gate's re-measurement
LATENCY_BAND_ENV = "ASCENDBRIDGE_LATENCY_BAND"  # BenchmarkSettings.latency_band


def latency_band() -> float:
    """The band in force: ASCENDBRIDGE_LATENCY_BAND (benchmark settings), else LATENCY_BAND: how
    much better than the gate's re-timing (its fastest call, or its model/probe ratio) a reported
    timing may be and still pass. Load no longer needs a wider band (the probe and the inconclusive
    verdict absorb it); the hard bound is max(x4, band). Raises ValueError (one line) on a value
    that is not a number >= 1."""
    band = section(BenchmarkSettings).latency_band
    return LATENCY_BAND if band is None else band


@dataclass
class AccuracyGateReport(GateReport):
    """One EvidenceCheck per accuracy_run evidence set (`label`: its run), and the standard applied."""

    runs: list[EvidenceCheck] = field(default_factory=list)
    # The framework's accuracy standard applied to the target dtype, with every request of the
    # spec's `tolerances` (tightened, loosened within bounds, refused): a human-visible decision.
    accuracy_standard: dict[str, Any] = field(default_factory=dict)
    # Timing checks the host's load left undecided ("<metrics file>: why"): the report is then
    # inconclusive when nothing else is open.
    undecided: list[str] = field(default_factory=list)
    # Per metrics file, each re-timed figure's judgement: verdict, reported and re-timed fastest
    # calls, model/probe ratios per round and their spread (ab_runtime/calibration.judge).
    timings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    verdict_word: ClassVar[str] = "accuracy"

    def checks(self) -> list[EvidenceCheck]:
        return self.runs


def static_problems(ev: MetricsFile) -> list[str]:
    """Everything that can be checked without torch: figures, trace, outputs file and its hash."""
    problems = check_metrics(ev.data)
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
    elif sha256_file(outputs) != (ev.data.get("evidence") or {}).get("outputs_sha256"):
        problems.append(
            f"{outputs.name}: sha256 does not match the metrics file (outputs changed or truncated after the run)"
        )
    return problems


def recompute(
    evidence: list[MetricsFile], spec_path: Path, python: Path, band: float = LATENCY_BAND
) -> dict[str, dict[str, list[Any]]]:
    """{"problems", "notes", "undecided", "timings"} per metrics file from recomputing accuracy, re-executing
    sample 0 and re-timing it beside the calibration probe in the adaptation's interpreter (one
    process for all sets: importing torch dominates); `undecided`: timing checks the host's load
    left inconclusive (ab_runtime/calibration.py)."""
    if not evidence:
        return {}
    argv = ["--latency-band", str(band), str(spec_path), *(str(ev.path) for ev in evidence)]
    result = run_inner(python, "recompute_accuracy.py", argv, cwd=spec_path.parent, timeout_s=RECOMPUTE_TIMEOUT_S)
    parsed = json_report(result.output)
    if parsed is None:
        tail = result.tail(3).replace("\n", " | ")
        why = f"accuracy recomputation did not run (exit {result.exit_code}): {tail}"
        return {ev.path.name: {"problems": [why], "notes": [], "undecided": [], "timings": []} for ev in evidence}
    out: dict[str, dict[str, list[Any]]] = {}
    for ev in evidence:
        entry = parsed.get(ev.path.name) or {"problems": ["no recomputation result"]}
        out[ev.path.name] = {
            key: [str(line) for line in entry.get(key, [])] for key in ("problems", "notes", "undecided")
        }
        out[ev.path.name]["timings"] = [t for t in entry.get("timings", []) if isinstance(t, dict)]
    return out


def apply_placement(adaptation_dir: Path) -> str:
    """Give this gate process (and the re-execution it starts) the placement the benchmark run
    recorded in its evidence, and say which (ascendbridge.gatekit.placement)."""
    try:
        evidence = find_metrics(adaptation_dir)
    except EvidenceError:
        return ""  # the gate itself reports the evidence problem
    return apply_recorded_placement(ev.data for ev in evidence)


def check_adaptation(adaptation_dir: Path, python_override: str | None = None) -> AccuracyGateReport:
    """The full gate for one adaptation directory; never raises for bad evidence."""
    adaptation_dir = Path(adaptation_dir)
    name = adaptation_dir.name
    spec_path = adaptation_dir / SPEC_FILE
    try:
        band = latency_band()
    except ValueError as exc:
        return AccuracyGateReport(name, False, str(exc))
    try:
        spec = json.loads(spec_path.read_text())
        target_dtype = str((spec.get("dtype") or {}).get("target") or "float32")
        expected = {ACCURACY_RUN: render_accuracy_run_text(AdaptationSpec.load(adaptation_dir))}
    except (OSError, ValueError, AttributeError):
        return AccuracyGateReport(name, False, f"{SPEC_FILE} missing or unreadable in {adaptation_dir}")
    untrusted = code_problems(adaptation_dir, expected)
    if untrusted:
        return AccuracyGateReport(name, False, untrusted_summary(untrusted))
    try:
        evidence = find_metrics(adaptation_dir)
    except EvidenceError as exc:
        return AccuracyGateReport(name, False, str(exc))
    if not evidence:
        return AccuracyGateReport(name, False, "no benchmark_metrics_*.json: accuracy_run.py has not produced evidence")
    try:
        python = adaptation_python(adaptation_dir, python_override)
    except EnvError as exc:
        return AccuracyGateReport(name, False, str(exc))
    static = {ev.path.name: static_problems(ev) for ev in evidence}
    # Tensors are loaded only for sets whose static checks pass: a bad set already fails.
    recomputed = recompute([ev for ev in evidence if not static[ev.path.name]], spec_path, python, band)
    standard = accuracy_standard.resolve(target_dtype, spec.get("tolerances"), str(spec.get("task_family") or "*"))
    decided = "".join(f"; {line}" for line in accuracy_standard.human_decisions(standard["decisions"]))
    runs = []
    undecided: list[str] = []
    timings: dict[str, list[dict[str, Any]]] = {}
    for ev in evidence:
        rerun = recomputed.get(ev.path.name, {"problems": [], "notes": [], "undecided": [], "timings": []})
        timings[ev.path.name] = rerun["timings"]
        problems = static[ev.path.name] + rerun["problems"]
        verdict = ev.verdict if not problems else None
        left = [] if problems else rerun["undecided"]  # a failed set is failed, whatever else is open
        undecided += [f"{ev.path.name}: {line}" for line in left]
        runs.append(
            EvidenceCheck(
                ev.path.name,
                not problems,
                verdict,
                problems,
                rerun["notes"] + [f"UNDECIDED: {line}" for line in left],
                ev.label,
            )
        )
    runs += [check for check in [evidence_check(adaptation_dir)] if check is not None]  # operator gaps
    bad = [r for r in runs if not r.consistent]
    primary = [r for ev, r in zip(evidence, runs) if ev.run.dtype == target_dtype]
    if bad:
        first = bad[0]
        summary = f"{len(bad)} of {len(runs)} evidence set(s) failed: {first.metrics_file}: {first.problems[0]}"
    elif not primary:
        summary = f"no evidence for the spec's target dtype {target_dtype}"
    elif not any(r.verdict == "pass" for r in primary):
        summary = f"accuracy failed in the target dtype {target_dtype} ({primary[0].label})"
    elif undecided:  # the only open question is a timing this host's load left undecided
        summary = (
            f"{len(undecided)} timing check(s) undecided under this host's load (re-run the gate later): {undecided[0]}"
        )
        return AccuracyGateReport(
            name, False, summary + decided, runs, standard, undecided, timings=timings, inconclusive=True
        )
    else:
        verdicts = ", ".join(f"{r.label}: {r.verdict}" for r in runs)
        return AccuracyGateReport(
            name, True, f"{len(runs)} evidence set(s) verified ({verdicts})" + decided, runs, standard, timings=timings
        )
    return AccuracyGateReport(name, False, summary + decided, runs, standard, timings=timings)
