"""Gate helper: re-run sample 0 of a benchmark run and check the saved tensors are real.

Uses the FRAMEWORK's copy of the adaptation runtime (put first on sys.path), never the
adaptation's, and its one harness (ab_runtime.harness): rebuild the model the same seeded way
the run did, rebuild sample 0's inputs, and require (1) the saved inputs to be exactly those,
(2) the saved CPU float32 reference to match a fresh reference forward, (3) the saved target
outputs to match a fresh forward of the same configuration (the run's passes applied) on the
same device and dtype; then re-time that configuration briefly beside the calibration probe and
judge the reported timings relative to it (ab_runtime/calibration.py), so the host's load cannot
flip the verdict. On CPU, runs are reproducible, so (3) is tight; on accelerators it allows twice
the dtype's rounding step. A device that is not present here (NPU evidence checked on a CPU
machine) is reported as a note, not a pass or a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _framework import RUNTIME_DIR

DTYPE_STEP = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
REFERENCE_TOLERANCE = 1e-5  # max |fresh - saved| / max |saved| for the CPU float32 reference
RETIME = (2, 10)  # warmup, timed calls per round of the gate's own latency re-measurement
RETIME_ROUNDS = 3  # more rounds only while the re-timed figure has not passed (ab_runtime/calibration.py)
# Pauses before each further series a failure needs (load comes in bursts of seconds, and beside busy
# loops and the suite's other worker an honest call ran x12-x48 slow for tens of seconds: see
# calibration.confirm); only a figure that fails in every series, 42 s apart at the ends, fails.
CONFIRM_PAUSES_S = (2.0, 10.0, 30.0)


def _runtime() -> Any:
    if str(RUNTIME_DIR.parent) not in sys.path[:1]:
        sys.path.insert(0, str(RUNTIME_DIR.parent))
    import ab_runtime

    if Path(ab_runtime.__file__).resolve().parent != RUNTIME_DIR.resolve():
        raise RuntimeError(f"ab_runtime resolved to {ab_runtime.__file__}, not the framework's copy")
    return ab_runtime


def _mismatch(name: str, fresh: dict[str, Any], saved: dict[str, Any], tolerance: float) -> list[str]:
    import torch

    problems = []
    if set(fresh) != set(saved):
        return [f"{name}: re-run outputs {sorted(fresh)} != saved {sorted(saved)}"]
    for key, value in fresh.items():
        old = saved[key]
        if tuple(value.shape) != tuple(old.shape):
            problems.append(f"{name}.{key}: re-run shape {list(value.shape)} != saved {list(old.shape)}")
            continue
        a, b = value.to(torch.float64), old.to(torch.float64)
        if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
            problems.append(f"{name}.{key}: nan/inf pattern differs from a re-run")
            continue
        finite = torch.isfinite(b)
        scale = float(b[finite].abs().max()) if bool(finite.any()) else 0.0
        err = float((a[finite] - b[finite]).abs().max()) if bool(finite.any()) else 0.0
        if err > tolerance * max(scale, 1e-12):
            problems.append(
                f"{name}.{key}: saved values differ from a re-run by {err:.3e} "
                f"(allowed {tolerance:.1e} x scale {scale:.3e})"
            )
    return problems


def rerun_workload(
    session: Any, build: Any, forward: Any, body: dict[str, Any], band: float, retime: tuple[int, int] = RETIME
) -> tuple[list[str], list[str], Any]:
    """(problems, notes, judgement of the re-timed headline) from re-running a recorded workload
    with the same harness: the CPU float32 reference's greedy tokens regenerated (they must equal
    the recorded ones exactly), the target's batch-1 greedy tokens regenerated (equal on CPU; a
    difference on an accelerator is noted), and the headline re-timed beside the calibration
    probe: the fastest decode step (or the knee point's fastest call) judged as the forward
    latency is (ab_runtime/calibration.py)."""
    import dataclasses

    from ab_runtime import workload_figures, workloads

    recorded = body["workload"]
    profile = workloads.Workload(**{**recorded, "sweep": tuple(recorded["sweep"])})
    session.workload = profile
    problems: list[str] = []
    notes: list[str] = []
    if profile.name in ("generation", "encoder_generation"):
        reference = workloads.reference_tokens(session, profile)
        if body.get("reference_tokens") != reference:
            problems.append("workload.reference_tokens are not the CPU float32 reference's greedy tokens")
        first = body["runs"][0]
        batch1 = dataclasses.replace(profile, batch=1)
        runs: list[dict[str, Any]] = []

        def one_round() -> tuple[list[float], list[float], None]:  # decode steps: switches counted per round
            runs.append(workloads.measure_generation(session, build, batch1, 1, retime[1] // 2, reference)["runs"][0])
            return (
                workload_figures.fastest_steps(runs[-1]["decode_steps_ms"]),
                runs[-1]["calibration"]["samples_ms"],
                None,
            )

        # Fastest single decode step on both sides: load only ever adds time, so it is the stable estimate.
        reported, what = float(min(workload_figures.fastest_steps(first["decode_steps_ms"]))), "decode step"
        judged = retimed(one_round, what, reported, first.get("calibration"), band)
        if runs[0]["tokens"][0] != first["tokens"][0]:
            why = (
                f"the target's greedy tokens do not reproduce (first difference at token "
                f"{workloads.divergence(runs[0]['tokens'][0], first['tokens'][0])['first_divergence']})"
            )
            (problems if session.choice.kind == "cpu" else notes).append(why)
    else:
        point = next(p for p in body["points"] if p["batch"] == body["knee_batch"])
        inputs = passes_inputs(session, build, point["batch"])
        reported, what = float(point["min_ms"]), f"batch-{point['batch']} latency"

        def sweep_round() -> tuple[list[float], list[float], list[int]]:
            timing, probe_ms, switches = counted_round(session, lambda: forward(inputs), retime)
            return timing.samples_ms, probe_ms, switches

        judged = retimed(sweep_round, what, reported, point.get("calibration"), band)
    judged.reason = f"workload {profile.name}: {judged.reason}"
    return problems, notes, judged


def counted_round(session: Any, fn: Any, retime: tuple[int, int]) -> tuple[Any, list[float], list[int]]:
    """One round of `fn` timed beside the probe: (timing, probe samples, the context switches of
    this process during each timed call, the device synchronised inside it: calibration.quiet_calls)."""
    from ab_runtime import calibration as cal

    tally: list[int] = []

    def call() -> None:
        fn()
        session.sync()

    timing, probe_ms = session.time_calibrated(cal.quiet_calls(call, tally), *retime)
    return timing, probe_ms, tally[len(tally) - len(timing.samples_ms) :]  # the warmup calls come first


def retimed(one_round: Any, what: str, reported_min_ms: float, calibration: Any, band: float) -> Any:
    """The gate's judgement of a reported fastest call (ab_runtime/calibration.py): a series of
    rounds of calls interleaved with the probe (`one_round` returns the model's and the probe's
    samples, and each model call's context switches or None), up to RETIME_ROUNDS, stopping at the
    first that passes; each round's involuntary and voluntary switches are counted too, and the
    CPU time the host gave other processes (calibration.Round). A failure stands only when every
    further series, CONFIRM_PAUSES_S apart, fails too; the first that does not decides
    (calibration.confirm)."""
    import time

    from ab_runtime import calibration as cal

    probe = (
        (float(calibration["min_ms"]), _positive(calibration.get("median_ms")))
        if isinstance(calibration, dict)
        else None
    )
    first = _series(one_round, what, reported_min_ms, probe, band)
    if first.verdict != "failed":
        return first
    for number, pause in enumerate(CONFIRM_PAUSES_S, start=2):
        time.sleep(pause)
        later = cal.confirm(first, _series(one_round, what, reported_min_ms, probe, band), number)
        if later.verdict != "failed":
            break
    return later


def _positive(value: Any) -> float | None:
    """A recorded figure as a float where it is a positive number (older evidence may lack it)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _series(
    one_round: Any, what: str, reported_min_ms: float, probe: tuple[float, float | None] | None, band: float
) -> Any:
    """One series of up to RETIME_ROUNDS rounds, judged after each (a pass ends it); `probe`: the
    run's fastest and median probe call."""
    import resource
    import statistics

    from ab_runtime import calibration as cal

    rounds: list[Any] = []
    others = cal.others_cpus()  # over the whole series (calibration.Round.others_cpus)
    while True:
        before = resource.getrusage(resource.RUSAGE_SELF)
        model_ms, probe_ms, per_call = one_round()
        others_cpus = others()
        after = resource.getrusage(resource.RUSAGE_SELF)
        quiet = [ms for ms, n in zip(model_ms, per_call or []) if n == 0]
        rounds.append(
            cal.Round(
                min(model_ms),
                min(probe_ms) if probe_ms else None,
                after.ru_nivcsw - before.ru_nivcsw,
                min(quiet) if quiet else None,
                after.ru_nvcsw - before.ru_nvcsw,
                statistics.median(probe_ms) if probe_ms else None,
                others_cpus,
            )
        )
        last = len(rounds) == RETIME_ROUNDS
        judged = cal.judge(
            what,
            reported_min_ms,
            probe[0] if probe else None,
            rounds,
            band,
            final=last,
            reported_probe_median_ms=probe[1] if probe else None,
        )
        if last or judged.verdict == "passed":
            return judged


def sort_judgements(judgements: list[Any]) -> dict[str, list[Any]]:
    """Judgements as {"problems", "notes", "undecided"} lines (failed, passed, inconclusive) and
    "timings": each one's verdict and figures (the gate's report shows them)."""
    return {
        "problems": [j.reason for j in judgements if j.verdict == "failed"],
        "notes": [f"re-timed: {j.reason}" for j in judgements if j.verdict == "passed"],
        "undecided": [j.reason for j in judgements if j.verdict == "inconclusive"],
        "timings": [{"verdict": j.verdict, **j.figures} for j in judgements],
    }


def passes_inputs(session: Any, build: Any, batch: int) -> dict[str, Any]:
    from ab_runtime.build import prepare_inputs

    return prepare_inputs(session.workload_inputs(batch, None), session.choice.torch_device, build)


def reexecute(
    spec_path: Path,
    run: dict[str, Any],
    saved: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    band: float = float("inf"),
    retime: tuple[int, int] = RETIME,
) -> dict[str, Any]:
    """{"problems", "notes", "undecided", "timings", "remeasured"} from re-running sample 0 of one run.

    The target is rebuilt with the passes the run applied (saved["passes"]; none for a benchmark
    run) from the run's baseline dtype, so an optimized configuration (int8, autocast, compile)
    is re-executed as itself, with the torch threads the run recorded; then it is re-timed with
    the same harness beside the calibration probe (`retime` = warmup, iterations a round) and
    judged against `metrics`' timing and calibration within `band` (ab_runtime/calibration.py;
    band inf: no judgement, one round). `undecided` holds the timing checks the host's load left
    inconclusive, `timings` every judgement's figures, `remeasured` the fastest round's timing
    (None where the device is not here).
    """
    import torch

    _runtime()
    from ab_runtime import harness
    from ab_runtime.errors import RuntimeDiagnosis
    from ab_runtime.optimize import passes

    try:
        session = harness.open_session(
            spec_path,
            str(run.get("device")),
            run.get("mode") == "pretrained",
            1,
            str(saved.get("baseline_dtype") or run.get("dtype")),
        )
    except RuntimeDiagnosis:
        return {
            "problems": [],
            "notes": [f"re-execution skipped: device {run.get('device')} is not available here"],
            "undecided": [],
            "timings": [],
            "remeasured": None,
        }
    metrics = metrics or {}
    threads = (metrics.get("environment") or {}).get("torch_threads")
    placed = ""
    if isinstance(threads, int) and threads > 0:  # the run's placement: what a hand-run gate must match
        torch.set_num_threads(threads)
        placed = f", torch threads {threads} as recorded"
    applied = [str(n) for n in saved.get("passes") or []]
    problems = [
        f"saved input '{k}' is not the seeded input the run must have used"
        for k, v in saved["inputs"].items()
        if k not in session.samples[0] or not torch.equal(session.samples[0][k], v)
    ]
    first = {k: v[0] for k, v in saved["reference"].items()}
    problems += _mismatch("reference", {k: v[0] for k, v in session.reference_out.items()}, first, REFERENCE_TOLERANCE)
    build, forward, _ = session.make(passes.get(applied))
    fresh = session.outputs(build, forward)
    dtype_name = str(run.get("dtype"))
    tolerance = REFERENCE_TOLERANCE if session.choice.kind == "cpu" else 2 * DTYPE_STEP.get(dtype_name, 2.0**-7)
    problems += _mismatch(
        "target", {k: v[0] for k, v in fresh.items()}, {k: v[0] for k, v in saved["target"].items()}, tolerance
    )
    fn = session.timed_call(build, forward)
    rounds: list[dict[str, Any]] = []

    def forward_round() -> tuple[list[float], list[float], list[int]]:
        timing, probe_ms, switches = counted_round(session, fn, retime)
        rounds.append({**timing.as_dict(), "probe_min_ms": min(probe_ms)})
        return timing.samples_ms, probe_ms, switches

    timed = metrics.get("timing") or {}
    judged = [
        retimed(
            forward_round,
            "forward call",
            float(timed.get("min_ms") or 0.0) or float("inf"),
            metrics.get("calibration"),
            band,
        )
    ]
    best = min(rounds, key=lambda r: r["min_ms"])
    what = f"with passes {', '.join(applied)}" if applied else "as the benchmark target"
    notes = [
        f"re-executed sample 0 on {session.choice.kind} ({session.choice.name}) {what}{placed}; "
        f"re-timed: median {best['median_ms']:.3f} ms, fastest {best['min_ms']:.3f} ms"
    ]
    workload = metrics.get("workload")
    if workload is not None:
        more, said, headline = rerun_workload(session, build, forward, workload, band, retime)
        problems, notes = problems + more, notes + said
        judged.append(headline)
    sorted_out = sort_judgements(judged if band != float("inf") else [])
    return {
        **sorted_out,
        "problems": problems + sorted_out["problems"],
        "notes": notes + sorted_out["notes"],
        "remeasured": {**best, "rounds": len(rounds)},
    }
