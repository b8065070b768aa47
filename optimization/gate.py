"""The optimization gates: the notes' consistency, and the optimized run re-verified by execution.

Both gates first check the code (ascendbridge.gatekit.integrity): accuracy_run_perf.py byte-identical to
what the generator renders from the spec and the notes' chosen passes, ab_runtime/ identical to
the framework's copy. Only then:
`check_notes_gate`: optimization_notes.json is complete and self-consistent (notes_check).
`check_perf_gate`: the perf_* evidence is complete (benchmark metrics checks), its accuracy
figures are recomputed from the saved outputs (the benchmark gate's recomputation) and sample 0
is re-executed WITH the chosen passes applied, the notes' record of the perf run matches, and a
fresh paired measurement of baseline vs the chosen passes (the gate's own, with the framework's
harness, interleaved so both sides see the same load) decides, pair by pair, 5 to 15 pairs
(ab_runtime/optimize/quick.py gate_verdict): passed when its interval's low end clears
1 + min_gain, exactly as the optimizer's confirmation had to, and the claim is within x1.4 of
that low end; failed when its high end is below that, or when the claimed speedup is more than
x1.4 above its high end (a forged figure fails once the interval drops the stalled pairs: a claim
the low end doubts is measured on). The claim is judged by the low end of its
own interval (the notes' `final.interval`, recomputed from the recorded samples by the notes
gate): a confirmation the host's load left no uninterrupted call reads wide, and says so. Pairs
that measure the load rather than the configuration pass nothing: an interval wider than x2.5
whose ends differ in the share of time saved (quick.load_doubt).
Inconclusive (exit 3, GateReport.inconclusive) when after 15 pairs the interval still straddles
the bar, or only so wide an interval supports the claim: the host is too noisy now, nothing failed.
There is no tolerance that lets a slowdown pass as an optimization.
For a generation or sweep workload the perf evidence must carry the workload the optimizer
optimized (its figures are re-derived by the metrics checks and re-run, decoder rebuilt from the
pass names, by the re-execution), and for generation its greedy-token verdict is recomputed with
the framework's accuracy_standard and must pass.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ab_runtime import accuracy_standard
from ab_runtime.metrics_file import read_metrics
from ab_runtime.optimize import quick
from ab_runtime.optimize.notes_file import read_notes
from ascendbridge.gatekit.checker import json_report
from ascendbridge.gatekit.compare import recorded_matches
from ascendbridge.gatekit.envs import EnvError, adaptation_python, run_inner
from ascendbridge.gatekit.evidence import EvidenceError
from ascendbridge.gatekit.integrity import code_problems
from ascendbridge.gatekit.metrics_check import check_metrics
from ascendbridge.gatekit.placement import apply_recorded_placement
from ascendbridge.gatekit.report import GateReport, untrusted_summary
from ascendbridge.gatekit.trace import TraceError, validate_trace
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec
from ascendbridge.workers.process import run_command
from optimization.notes_check import RUNTIME_DIR, check_notes
from optimization.render import ACCURACY_RUN_PERF, PERF_METRICS_PREFIX, render_text

INNER = Path(__file__).resolve().parent / "inner" / "reverify.py"
REVERIFY_TIMEOUT_S = 900.0


@dataclass
class OptimizationGateReport(GateReport):
    """Both optimization gates' report: their problems, and the perf gate's re-measurement."""

    problems: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def problem_lines(self) -> list[str]:
        return self.problems


def untrusted_code(directory: Path, notes: dict[str, Any]) -> list[str]:
    """ascendbridge.gatekit.integrity for the perf wrapper rendered with the notes' choice, and ab_runtime/."""
    try:
        spec = AdaptationSpec.load(directory)
        expected = {ACCURACY_RUN_PERF: render_text(spec, list(notes["chosen"]), str(notes["device"]))}
    except (ValueError, KeyError, TypeError) as exc:
        return [f"cannot render {ACCURACY_RUN_PERF} to compare: {str(exc).splitlines()[0]}"]
    return code_problems(directory, expected)


def check_notes_gate(directory: Path) -> OptimizationGateReport:
    name = Path(directory).name
    try:
        notes = read_notes(directory)
    except EvidenceError as exc:
        return OptimizationGateReport(name, False, str(exc))
    problems = check_notes(notes)
    if not problems:
        problems = untrusted_code(directory, notes)
    if problems:
        return OptimizationGateReport(name, False, f"{len(problems)} problem(s): {problems[0]}", problems)
    final = notes["final"]
    selection = final.get("selection_speedup")
    return OptimizationGateReport(
        name,
        True,
        f"notes consistent: {final['outcome']}, chosen {notes['chosen'] or 'nothing'}, "
        f"confirmed x{final['speedup']:.3f}" + (f" (search's selection figure x{selection:.3f})" if selection else ""),
    )


def _perf_metrics(directory: Path, notes: dict[str, Any]) -> tuple[Path | None, list[str]]:
    named = (notes.get("perf_run") or {}).get("metrics")
    if not isinstance(named, str) or "/" in named or not named.startswith(PERF_METRICS_PREFIX):
        return None, [f"notes.perf_run.metrics does not name a {PERF_METRICS_PREFIX}*.json evidence file"]
    path = Path(directory) / named
    return (path, []) if path.is_file() else (None, [f"{named} not found"])


def reverify(
    python: Path, directory: Path, notes: dict[str, Any], pairs: int, iters: int, recompute: Path | None = None
) -> dict[str, Any]:
    """The gate's own paired re-measurement (inner/reverify.py), at most `pairs` pairs, with its
    verdict by quick.gate_verdict on the notes' claimed speedup; with `recompute` (the perf
    evidence), the same process first recomputes that evidence (its "recompute" part) and measures
    only when it holds."""
    mode = str((notes.get("baseline") or {}).get("mode", "dry_run"))
    workload = notes["settings"].get("workload")
    interval = notes["final"].get("interval")
    argv = [
        str(python),
        "-E",
        "-s",
        str(INNER),
        *([f"--workload={workload}"] if workload else []),
        *([f"--claimed-low={float(interval[0])!r}"] if isinstance(interval, list) and interval else []),
        *([f"--recompute={recompute}"] if recompute else []),
        str(RUNTIME_DIR.parent),
        str(Path(directory) / SPEC_FILE),
        str(notes["device"]),
        mode,
        str(pairs),
        str(iters),
        str(notes["settings"]["warmup"]),
        repr(float(notes["final"]["speedup"])),
        repr(float(notes["settings"]["min_gain"])),
        *notes["chosen"],
    ]
    result = run_command(argv, cwd=directory, timeout_s=REVERIFY_TIMEOUT_S)
    parsed = json_report(result.output)
    if parsed is None:
        return {"error": f"re-measurement did not run (exit {result.exit_code}): {result.tail(2)}"}
    return parsed


def recorded_problems(accuracy: dict[str, Any], notes: dict[str, Any]) -> list[str]:
    """What the perf evidence's own accuracy record says against the claim (no execution)."""
    problems = []
    if not recorded_matches(
        accuracy_standard.accuracy_summary(accuracy), (notes.get("perf_run") or {}).get("accuracy")
    ):
        problems.append("notes.perf_run.accuracy does not match the accuracy recomputed from the saved outputs")
    if accuracy.get("verdict") != "pass":
        problems.append("the optimized run failed accuracy")
    return problems


def recomputation_problems(report: dict[str, Any], metrics_name: str) -> list[str]:
    """The recomputation's problems from an inner report's "recompute" part (recompute_accuracy.py's
    output); one problem when it did not run at all."""
    recomputed = report.get("recompute")
    if not isinstance(recomputed, dict):
        error = report.get("error")
        return [f"accuracy recomputation did not run{f': {error}' if error else ''}"]
    return [str(p) for p in (recomputed.get(metrics_name) or {}).get("problems", ["no recomputation result"])]


def apply_placement(directory: Path) -> str:
    """Give this gate process (and the re-measurement it starts) the placement the perf run
    recorded, and say which (ascendbridge.gatekit.placement); "" when its evidence is unreadable
    (the gate itself reports that)."""
    try:
        path, _ = _perf_metrics(directory, read_notes(directory))
        return apply_recorded_placement([read_metrics(path).data]) if path is not None else ""
    except (ValueError, EvidenceError, TypeError, KeyError):
        return ""


def workload_problems(directory: Path, notes: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """The perf evidence times and records the workload the optimizer optimized; a generation
    workload's greedy tokens pass the framework's rule (recomputed here, never trusted)."""
    optimized = notes["settings"].get("workload") or "forward"
    ran = (metrics.get("optimization") or {}).get("workload") or "forward"
    if ran != optimized:
        return [f"the perf run timed the {ran} workload, the optimizer optimized {optimized}"]
    body = metrics.get("workload")
    if optimized == "forward":
        return []
    if not isinstance(body, dict) or (body.get("workload") or {}).get("name") != optimized:
        return [f"the perf evidence has no {optimized} workload figures (the headline the optimizer optimized)"]
    if optimized not in ("generation", "encoder_generation"):
        return []
    agreement = body.get("greedy_vs_reference") or {}
    try:
        spec = json.loads((Path(directory) / SPEC_FILE).read_text())
        expected = accuracy_standard.generation_verdict(
            float(agreement["match_rate"]),
            agreement.get("first_divergence"),
            str(spec.get("task_family")),
            spec.get("tolerances"),
        )
    except (KeyError, TypeError, ValueError, OSError) as exc:
        return [f"workload.greedy_vs_reference cannot be judged: {type(exc).__name__}: {exc}"]
    recorded = (metrics.get("optimization") or {}).get("generation_accuracy") or {}
    problems = []
    if recorded.get("verdict") != expected["verdict"] or not recorded_matches(
        recorded.get("match_rate"), expected["match_rate"]
    ):
        problems.append(
            f"optimization.generation_accuracy {recorded.get('verdict')!r} does not follow from the recorded "
            f"greedy tokens ({expected['verdict']}, match rate {expected['match_rate']:.3f})"
        )
    if expected["verdict"] != "pass":
        problems.append(
            f"the optimized generation's greedy tokens match the reference at {expected['match_rate']:.3f} "
            f"< {expected['match_rate_min']} (first divergence {expected['first_divergence']})"
        )
    return problems


def check_perf_gate(
    directory: Path, python_override: str | None = None, pairs: int = quick.GATE_MAX_PAIRS, iters: int = 5
) -> OptimizationGateReport:
    directory = Path(directory)
    name = directory.name
    try:
        notes = read_notes(directory)
    except EvidenceError as exc:
        return OptimizationGateReport(name, False, str(exc))
    if (
        not isinstance(notes, dict)
        or not isinstance(notes.get("chosen"), list)
        or not isinstance(notes.get("final"), dict)
    ):
        return OptimizationGateReport(
            name, False, "optimization_notes.json is malformed (run check_optimization_notes.py)"
        )
    untrusted = untrusted_code(directory, notes)
    if untrusted:
        return OptimizationGateReport(name, False, untrusted_summary(untrusted), untrusted)
    path, problems = _perf_metrics(directory, notes)
    if path is None:
        return OptimizationGateReport(name, False, problems[0], problems)
    try:
        metrics = read_metrics(path).data
        python = adaptation_python(directory, python_override)
    except (EvidenceError, EnvError) as exc:
        return OptimizationGateReport(name, False, str(exc))
    problems = check_metrics(metrics)
    trace = directory / str((metrics.get("evidence") or {}).get("trace", ""))
    try:
        validate_trace(trace)
    except TraceError as exc:
        problems.append(str(exc))
    applied = (metrics.get("optimization") or {}).get("passes")
    if sorted(applied or []) != sorted(notes["chosen"]):
        problems.append(f"the perf run applied {applied}, the notes chose {notes['chosen']}")
    problems += workload_problems(directory, notes, metrics)
    acc = metrics.get("accuracy") or {}
    recorded = recorded_problems(acc, notes)
    details: dict[str, Any] = {"metrics": path.name}
    if problems or recorded or not notes["chosen"]:  # nothing to re-measure: the recomputation alone
        result = run_inner(python, "recompute_accuracy.py", [str(directory / SPEC_FILE), str(path)], cwd=directory)
        parsed = json_report(result.output)
        problems += recomputation_problems(
            {"recompute": parsed} if parsed else {"error": f"exit {result.exit_code}"}, path.name
        )
        problems += [] if problems else recorded
    else:  # one process: the recomputation, then (when it holds) the paired re-measurement
        again = reverify(python, directory, notes, pairs, iters, recompute=path)
        problems += recomputation_problems(again, path.name)
        if not problems:  # the recomputation held, so the pairs were taken: they decide
            details["reproduced"] = {k: v for k, v in again.items() if k != "recompute"}
            if "error" in again:
                problems.append(f"re-measurement failed: {again['error']}")
            elif again.get("verdict") == "failed":
                problems.append(str(again["why"]))
            elif again.get("verdict") == "inconclusive":
                return OptimizationGateReport(
                    name, False, f"{', '.join(notes['chosen'])}: {again['why']}", [], details, inconclusive=True
                )
    if problems:
        return OptimizationGateReport(name, False, f"{len(problems)} problem(s): {problems[0]}", problems, details)
    if notes["chosen"]:
        summary = (
            f"optimized run verified: {', '.join(notes['chosen'])}, accuracy {acc.get('verdict')}, reported "
            f"x{notes['final']['speedup']:.3f}, re-measured x{details['reproduced']['speedup']:.3f} "
            f"({details['reproduced']['why']})"
        )
    else:
        summary = f"no gain claimed; baseline evidence verified, accuracy {acc.get('verdict')}"
    return OptimizationGateReport(name, True, summary, [], details)
