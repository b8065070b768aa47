"""Execution-grounded pass search: every applicable pass measured against the baseline, paired.

    python -m ab_runtime.optimize --device cpu [--pairs 5] [--iters 3] [--warmup 2] [--passes a,b]

What is timed is the workload's headline (ab_runtime/workloads.headline_call): a greedy generation
at batch 1 and one at the workload's larger batch for generation workloads (TPOT and tokens/s at
both), a forward at the headline batch for a
batch sweep (throughput), the accuracy forward otherwise.
Baseline: the benchmark harness's target model (the spec's dtype on the device, eager). Each
applicable pass alone is built from the same float32 reference weights, its outputs compared
with the float32 baseline outputs by the shared comparator (dtype-aware thresholds, float64
reference where it fits), then timed against the baseline PAIRED and INTERLEAVED (same warmup,
RNG re-seeded before each block, profiler off), one block pair at a time until its keep verdict
is decided (quick.decide: a clear loss stops after its first pair; at most --pairs); one whose
accuracy already failed is not timed at all (it could not be kept). Passes that
do not apply cost nothing (their rule is read first); the others are tried in order of expected
gain (quick.PRIORS), and one that a kept pass of its group already outranks is listed, never built
(quick.outranked; --measure-all builds it). Kept passes are combined greedily, each step
measured against the current best the same way, and the combination verified against the
baseline: that is the `selection`. Its own figure is the best of many noisy measurements, so it
is not reported: a fresh process (ab_runtime.optimize.confirm) re-measures baseline vs the selection and
its figures give `final` (or `no_gain`). Cold start (building + first call, which includes
compilation) is measured separately. All building, inputs and timing come from ab_runtime.harness.
For a generation workload the catalogue's decode passes (kind `decode`: static KV cache + compile,
CUDA graphs, torchair, aclgraph, fused incremental attention) are candidates like every pass, and
every candidate's verdict adds the greedy-token comparison of its headline generation with the
CPU float32 reference's (match rate, first divergence; accuracy_standard.generation_verdict): a
configuration that changes the generated tokens beyond the budget is rejected on accuracy.
Writes optimization_notes.json; the last line printed is `ASCENDBRIDGE_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import RESULT_MARKER, accuracy_standard, harness, pairstats, phases, workloads
from .. import build as ab_build
from .. import device as ab_device
from ..errors import RuntimeDiagnosis
from ..ops import acceptance
from ..progress import Progress
from ..result import run_main
from ..workload_figures import divergence
from . import decode_passes, passes, quick
from .notes_file import NOTES_FILE, NOTES_SCHEMA

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding ab_runtime/
HEADLINES = {
    "generation": "greedy generation of workload.new_tokens tokens at batch 1 and at workload.batch "
    "(decode-dominated: TPOT and batch tokens/s)",
    "encoder_generation": "encoder + greedy generation of workload.new_tokens tokens at batch 1 and at workload.batch",
    "batch_sweep": "one forward at workload.headline_batch (throughput)",
    "forward": "one forward of the accuracy inputs",
}


def generation_accuracy(session: harness.Session, produced: Any, reference: list[int]) -> dict[str, Any]:
    """The greedy tokens of one headline generation (batch 1) against the reference's, judged by
    the framework's rule (accuracy_standard.generation_verdict)."""
    agreement = divergence(produced.tokens[0], reference)
    verdict = accuracy_standard.generation_verdict(
        agreement["match_rate"], agreement["first_divergence"], session.spec.task_family, session.thresholds.tolerances
    )
    return {**verdict, "compared": agreement["compared"]}


def judge(
    session: harness.Session,
    b: ab_build.Build,
    run: Callable[[dict[str, Any]], Any],
    fn: Callable[[], Any],
    reference: list[int] | None,
) -> dict[str, Any]:
    """A configuration's accuracy digest: the forward outputs by the optimization budget and, for a
    generation workload (`reference` tokens given), its greedy tokens; it passes only if both do."""
    summary = accuracy_standard.accuracy_summary(session.judge_optimized(b, session.outputs(b, run)))
    if reference is None:
        return summary
    with torch.inference_mode(), phases.phase("accuracy"):
        generation = generation_accuracy(session, fn(), reference)
    summary["generation"] = generation
    if generation["verdict"] != "pass":
        summary["verdict"] = "fail"
        summary["problems"] = list(summary["problems"]) + [
            f"greedy tokens match the reference at {generation['match_rate']:.3f} < {generation['match_rate_min']} "
            f"(first divergence at new token {generation['first_divergence']})"
        ]
    return summary


def decode_reasons(session: harness.Session) -> dict[str, str | None]:
    """Why each decode pass does (None) or does not apply to this device, model and generation
    shape (decode_passes.applicability); empty for workloads without a decode loop."""
    w = session.workload
    if w.name not in passes.GENERATION_WORKLOADS:
        return {}
    shape = decode_passes.DecodeConfig(
        batch=w.batch, prompt_tokens=w.prompt_len, new_tokens=w.new_tokens, dtype=session.baseline_dtype_name
    )
    return {r["name"]: r["reason"] for r in decode_passes.applicability(session.choice, session.reference, shape)}


def _compile_room() -> None:
    """Many compiled copies of one model class in one process: keep dynamo from falling back."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)


def sequential_paired(
    session: harness.Session,
    base: Callable[[], Any],
    cand: Callable[[], Any],
    max_pairs: int,
    warmup: int,
    iters: int,
    decided: Callable[[list[float]], bool],
) -> dict[str, Any]:
    """harness.paired one block pair at a time (warmup before the first), stopped as soon as
    `decided(pair speedups)`, at most `max_pairs`: the figures of the pairs taken (pairstats), with
    the blocks harness.paired re-timed or kept unclean, summed. On a CPU a pair kept without a
    clean call on both sides is set aside and taken again, at most quick.SET_ASIDE times (its
    speedup recorded as `set_aside_pair_speedups`, never in the figures): the choice reads switch
    counts, not times, so it cannot favour a pass, and one load-made pair no longer rejects a gain."""
    base_blocks: list[list[float]] = []
    cand_blocks: list[list[float]] = []
    set_aside: list[float] = []
    counts = dict.fromkeys(harness.LOAD_COUNTS, 0)
    may_set_aside = harness.load_retimed(session)
    warm, taken = warmup, 0
    with Progress(f"paired measurement (until decided, at most {max_pairs} blocks)", unit="block") as progress:
        while True:
            block = harness.paired(session, base, cand, 1, warm, iters, first_block=taken)
            warm, taken = 0, taken + 1
            progress.advance()
            counts = {key: n + block[key] for key, n in counts.items()}
            if may_set_aside and block["unclean_blocks"] and len(set_aside) < quick.SET_ASIDE:
                set_aside += block["pair_speedups"]
                continue
            base_blocks.append(block["baseline_samples_ms"])
            cand_blocks.append(block["candidate_samples_ms"])
            figures = pairstats.summarize_pairs(base_blocks, cand_blocks, warmup)
            if len(base_blocks) >= max_pairs or decided(figures.pair_speedups):
                return {**figures.as_dict(), **counts, "set_aside_pair_speedups": set_aside}


def sequential_against_baseline(
    session: harness.Session,
    chosen: list[passes.Pass],
    max_pairs: int,
    warmup: int,
    iters: int,
    decided: Callable[[list[float]], bool],
) -> dict[str, Any]:
    """A fresh baseline and a fresh `chosen` variant, timed on the session workload's headline
    call by `sequential_paired`: what the confirmation and the perf gate's re-measurement time."""
    base_build, base_run, _ = session.make([])
    build, run, _ = session.make(chosen)
    base, cand = session.headline_call(base_build, base_run), session.headline_call(build, run)
    return sequential_paired(session, base, cand, max_pairs, warmup, iters, decided)


@dataclass
class _Search:
    """One search's fixed inputs and its baseline: what every phase measures a candidate against."""

    session: harness.Session
    pairs: int
    warmup: int
    iters: int
    min_gain: float
    reference: list[int] | None  # a generation workload's reference tokens (greedy decode), else None
    base_fn: Callable[[], Any]
    base_first: float  # the baseline's first call, ms

    def timed(self, base: Callable[[], Any], cand: Callable[[], Any]) -> dict[str, Any]:
        return sequential_paired(
            self.session,
            base,
            cand,
            self.pairs,
            self.warmup,
            self.iters,
            lambda speedups: quick.decide(speedups, self.min_gain, self.pairs) != "continue",
        )

    def outcome(self, figures: dict[str, Any], acc: dict[str, Any], cold_start: dict[str, float]) -> dict[str, Any]:
        """A measured candidate's fields, alike for one pass and a combination step: kept or not, and why."""
        keep, reason = pairstats.gain_decision(figures, acc["verdict"], self.min_gain)
        evidence = {"accuracy": acc, "paired": figures, "cold_start": cold_start}
        return {"measured": True, "kept": keep, "reason": reason, **evidence}

    def single(
        self, p: passes.Pass, why_not: str | None, outranked: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], Callable[[], Any] | None]:
        """One pass alone against the baseline: its row, and its built call when it is kept
        (`outranked`: quick.outranked's figures, the pass is then listed, never built)."""
        session = self.session
        started = time.monotonic()
        row: dict[str, Any] = {
            "name": p.name,
            "passes": [p.name],
            "kind": p.kind,
            "group": p.group,
            "changes_code": p.changes_code,
            "applicable": why_not is None,
        }
        kept_fn: Callable[[], Any] | None = None
        if why_not is not None:
            row.update(measured=False, kept=False, reason=f"not applicable: {why_not}")
        elif outranked is not None:
            row.update(measured=False, kept=False, reason=quick.outranked_reason(outranked), **outranked)
        elif p.needs_restart:
            row.update(
                measured=False,
                kept=False,
                reason="needs a fresh process (environment read at import): not measured in-process",
            )
        else:
            try:
                b, run, build_s = session.make([p])
                fn = session.headline_call(b, run)
                first = harness.first_call_ms(session, fn)
                acc = judge(session, b, run, fn, self.reference)
                # a pass that fails accuracy is never kept (pairstats.gain_decision): timing it decides nothing
                figures = self.timed(self.base_fn, fn) if acc["verdict"] == "pass" else None
            except harness.HarnessError:
                raise
            except acceptance.ReplacementRefused as exc:  # the contract refused every replacement: not applied
                row.update(measured=False, kept=False, reason=f"not applied: {exc}")
                harness.say(f"pass {p.name}: {row['reason']}")
                return row, None
            except Exception as exc:  # a pass that cannot run on this model is rejected, not fatal
                first_line = str(exc).splitlines()[0] if str(exc) else ""
                row.update(
                    measured=False, kept=False, reason=f"failed to apply or run: {type(exc).__name__}: {first_line}"
                )
                harness.say(f"pass {p.name}: {row['reason']}")
                return row, None
            cold_start = {"build_s": build_s, "first_call_ms": first, "baseline_first_call_ms": self.base_first}
            if figures is None:
                row.update(
                    measured=False, kept=False, reason=quick.ACCURACY_NOT_TIMED, accuracy=acc, cold_start=cold_start
                )
            else:
                row.update(self.outcome(figures, acc, cold_start))
            if b.acceptance:
                row["acceptance"] = b.acceptance
            if row["kept"]:
                kept_fn = fn
        aside = len(row.get("paired", {}).get("set_aside_pair_speedups", []))
        harness.say(
            f"pass {p.name}: {'KEPT' if row['kept'] else 'rejected'} - {row['reason']}"
            + (f" ({aside} pair(s) set aside: no clean call on both sides)" if aside else "")
            + (f" [{time.monotonic() - started:.0f} s]" if "cold_start" in row else "")
        )
        return row, kept_fn

    def combine(
        self, kept: list[dict[str, Any]], built: dict[str, Callable[[], Any]]
    ) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
        """The kept passes added one by one, each step against the configuration before it, then the
        combination verified against the baseline itself: the steps, the passes chosen and their row."""
        session = self.session
        combination: list[dict[str, Any]] = []
        chosen = [kept[0]["name"]]
        final_row = kept[0]
        current_fn = built[kept[0]["name"]]
        current: dict[str, Any] = kept[0]
        with Progress("combining the kept passes", total=len(kept) - 1, unit="pass") as combining:
            for r in combining.over(kept[1:]):
                cand = passes.get(chosen + [r["name"]])
                step: dict[str, Any] = {"passes": chosen + [r["name"]], "against": list(chosen)}
                clash = passes.conflicts(passes.get(chosen), passes.BY_NAME[r["name"]])
                if clash:
                    step.update(measured=False, kept=False, reason=f"not combined: {clash}")
                else:
                    b, run, build_s = session.make(cand)
                    fn = session.headline_call(b, run)
                    first = harness.first_call_ms(session, fn)
                    acc = judge(session, b, run, fn, self.reference)
                    figures = self.timed(current_fn, fn)
                    step.update(self.outcome(figures, acc, {"build_s": build_s, "first_call_ms": first}))
                    if step["kept"]:
                        chosen, current_fn, current = step["passes"], fn, step
                combination.append(step)
                harness.say(
                    f"combine {'+'.join(step['passes'])}: {'KEPT' if step['kept'] else 'rejected'} - {step['reason']}"
                )
        if len(chosen) > 1:  # verify the combination against the baseline itself
            # the last kept step built exactly this configuration: re-timed, not rebuilt (no second compile)
            acc = current["accuracy"]
            figures = self.timed(self.base_fn, current_fn)
            cold_start = {**current["cold_start"], "baseline_first_call_ms": self.base_first}
            verify = {"passes": list(chosen), "against": [], **self.outcome(figures, acc, cold_start)}
            combination.append(verify)
            if verify["kept"] and figures["speedup"] >= kept[0]["paired"]["speedup"] / (1 + self.min_gain):
                final_row = verify
            else:
                chosen, final_row = [kept[0]["name"]], kept[0]
                verify["reason"] += "; the best single pass is kept instead"
            harness.say(f"verify {'+'.join(verify['passes'])} vs baseline: x{figures['speedup']:.3f}")
        return combination, chosen, final_row


def search(
    session: harness.Session,
    candidates: list[passes.Pass],
    traits: passes.Traits,
    pairs: int,
    warmup: int,
    iters: int,
    min_gain: float,
    budgeted: bool = True,
) -> dict[str, Any]:
    """The whole search: the baseline, each pass alone, the kept ones combined, the selection
    (`budgeted`: a pass quick.outranked rules out is not built; False measures every applicable one).
    Returns the notes body (without file-level metadata)."""
    _compile_room()
    with Progress("optimization baseline (build, first call, accuracy)"):
        base_build, base_run, base_build_s = session.make([])
        base_fn = session.headline_call(base_build, base_run)
        base_first = harness.first_call_ms(session, base_fn)
        base_acc = accuracy_standard.accuracy_summary(
            session.accuracy(base_build, session.outputs(base_build, base_run))
        )
        with phases.phase("accuracy"):
            reference = (
                workloads.reference_tokens(session, session.workload)
                if session.workload.name in passes.GENERATION_WORKLOADS
                else None
            )
            if reference is not None:
                with torch.inference_mode():
                    base_acc["generation"] = generation_accuracy(session, base_fn(), reference)
    harness.say(
        f"baseline {session.choice.kind} {session.baseline_dtype_name}: accuracy vs float32 reference "
        f"{base_acc['verdict']}; first call {base_first:.1f} ms"
    )
    phase = _Search(session, pairs, warmup, iters, min_gain, reference, base_fn, base_first)
    rows: list[dict[str, Any]] = []
    built: dict[str, Callable[[], Any]] = {}
    # applicability is read before anything is built; measured in order of expected gain (quick.PRIORS),
    # a pass its group's kept pass already outranks is listed, not built (quick.outranked)
    reasons = {p.name: p.applies(traits) for p in candidates}
    order = quick.ordered([p for p in candidates if reasons[p.name] is None])
    with Progress("optimization search", total=len(order), unit="pass") as progress:
        for p in order + [p for p in candidates if reasons[p.name] is not None]:
            outranked = quick.outranked(p.name, p.group, rows) if reasons[p.name] is None and budgeted else None
            row, fn = phase.single(p, reasons[p.name], outranked)
            rows.append(row)
            if fn is not None:
                built[p.name] = fn
            if reasons[p.name] is None:  # the passes not applicable cost nothing: not counted
                verdict = "outranked" if outranked else "kept" if row["kept"] else "rejected"
                progress.advance(note=f"last: {p.name} {verdict}")
    kept = sorted((r for r in rows if r["kept"]), key=lambda r: -r["paired"]["speedup"])
    combination, chosen, final_row = phase.combine(kept, built) if kept else ([], [], None)
    return {
        "baseline": {
            "device": session.choice.kind,
            "dtype": session.baseline_dtype_name,
            "mode": session.mode,
            "description": "eager model in the spec's target dtype (the benchmark harness's target)",
            "accuracy_vs_float32_reference": base_acc,
            "cold_start": {"build_s": base_build_s, "first_call_ms": base_first},
        },
        "passes": rows,
        "combination": combination,
        "selection": _selection(chosen, final_row),
        **({"reference_tokens": reference} if reference is not None else {}),
    }


def _selection(chosen: list[str], final_row: dict[str, Any] | None) -> dict[str, Any]:
    """What the search chose, with the paired figures and accuracy that chose it (or why nothing)."""
    selection: dict[str, Any] = {"passes": list(chosen), "outcome": "gain" if chosen else "no_gain"}
    if final_row is not None:
        pf = final_row["paired"]
        selection.update(
            baseline_median_ms=pf["baseline_median_ms"],
            optimized_median_ms=pf["candidate_median_ms"],
            speedup=pf["speedup"],
            interval=pf["interval"],
            confidence=pf["confidence"],
            pairs=pf["pairs"],
            accuracy=final_row["accuracy"],
            cold_start=final_row["cold_start"],
        )
    else:
        selection.update(speedup=1.0, reason="no pass was faster beyond the measured noise with accuracy intact")
    return selection


def environment(session: harness.Session, traits: passes.Traits) -> dict[str, Any]:
    """The harness's environment record plus the traits the catalogue's rules read."""
    return {
        **harness.environment(session),
        "threads": traits.threads,
        "cores": traits.cores,
        "bf16_gemm_speedup": traits.bf16_gemm_speedup,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Search the pass catalogue for this adaptation (paired, interleaved).")
    p.add_argument("--device", default="cpu", choices=ab_device.DEVICE_CHOICES)
    p.add_argument("--pairs", type=int, default=5, help="interleaved baseline/candidate block pairs (>= 5)")
    p.add_argument("--iters", type=int, default=5, help="timed calls per block (its fastest call counts)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls before timing (same for both sides)")
    p.add_argument("--num-samples", type=int, default=2, help="seeded input batches compared for accuracy")
    p.add_argument("--min-gain", type=float, default=pairstats.DEFAULT_MIN_GAIN)
    p.add_argument("--passes", default="", help="comma-separated subset of the catalogue (default: all for the device)")
    p.add_argument(
        "--measure-all",
        action="store_true",
        help="build and measure every applicable pass, also one its group's kept pass outranks (quick.outranked)",
    )
    p.add_argument("--use-pretrained", action="store_true")
    p.add_argument("--workload", default=None, help="workload whose headline figure is optimized (default: the spec's)")
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--out", default=NOTES_FILE)
    p.add_argument(
        "--perf-evidence",
        action="store_true",
        help="the confirmation run also writes accuracy_run_perf.py's evidence (perf_*) from its pairs",
    )
    args = p.parse_args(argv)
    if args.pairs < 5 or args.iters < 1 or args.warmup < 0 or args.num_samples < 1:
        raise harness.HarnessError("--pairs must be >= 5, --iters and --num-samples >= 1, --warmup >= 0")
    if not 0 <= args.min_gain < 1:
        raise harness.HarnessError("--min-gain must be in [0, 1)")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    passes.cpu_bf16_override()  # a bad ASCENDBRIDGE_CPU_BF16 fails before anything is loaded or written
    session = harness.open_session(
        Path(args.spec), args.device, args.use_pretrained, args.num_samples, workload=args.workload
    )
    names = [n for n in args.passes.replace(",", " ").split() if n]
    try:
        candidates = passes.get(names) if names else passes.search_candidates(session.choice.kind)
    except ValueError as exc:
        raise PassSelectionError(str(exc)) from None
    # decode passes of another device are listed with their reason; forward passes are refused
    wrong = [p.name for p in candidates if p.device != session.choice.kind and p.kind != "decode"]
    if wrong:
        raise PassSelectionError(f"pass(es) {', '.join(wrong)} are for another device than {session.choice.kind}")
    speed = passes.cpu_bf16_gemm_speedup() if session.choice.kind == "cpu" else None
    traits = passes.model_traits(
        session.reference,
        session.choice.kind,
        session.spec.task_family,
        session.baseline_dtype_name,
        speed,
        workload=session.workload.name,
        decode=decode_reasons(session),
    )
    harness.say(
        f"optimizing {session.spec.model_id} on {session.choice.kind} ({session.choice.name}); "
        f"{len(candidates)} catalogue pass(es); {args.pairs} pairs x {args.iters} iters, warmup {args.warmup}"
    )
    body = search(session, candidates, traits, args.pairs, args.warmup, args.iters, args.min_gain, not args.measure_all)
    notes = {
        **harness.record_header(NOTES_SCHEMA, session.spec),
        "device": session.choice.kind,
        "device_name": session.choice.name,
        "settings": {
            "pairs": args.pairs,
            "iters_per_block": args.iters,
            "warmup": args.warmup,
            "num_samples": args.num_samples,
            "min_gain": args.min_gain,
            "measure_all": args.measure_all,
            "confidence": pairstats.CONFIDENCE,
            "seed": session.spec.recipe.seed,
            "profiler_during_timing": False,
            # What each paired call times (workloads.headline_call): the headline of this workload.
            "workload": session.workload.name,
            "headline": HEADLINES[session.workload.name],
        },
        # Every pass is judged by this one budget against the float32 reference (comparator.judge_optimized).
        "accuracy_budget": accuracy_standard.budget_statement(session.spec.task_family, session.thresholds.tolerances),
        "traits": traits.as_dict(),
        **body,
        "environment": environment(session, traits),
    }
    out = Path(args.out)
    harness.write_json(out, notes)
    sel = notes["selection"]
    harness.say(
        f"selected: {', '.join(sel['passes']) or 'nothing (no gain)'} at x{sel['speedup']:.3f} in the search; "
        "confirming in a fresh process"
    )
    try:
        run_fresh(out, Path(args.spec), args.device, args.use_pretrained, args.perf_evidence)
    except BaseException:
        out.unlink(missing_ok=True)  # notes without a confirmed result must not survive
        raise
    notes = json.loads(out.read_text())
    final = notes["final"]
    return {
        "ok": True,
        "chosen": notes["chosen"],
        "outcome": final["outcome"],
        "speedup": final["speedup"],
        "selection_speedup": final.get("selection_speedup"),
        "baseline_median_ms": final.get("baseline_median_ms"),
        "optimized_median_ms": final.get("optimized_median_ms"),
        "notes": out.name,
        "runtime_only": notes["runtime_only"],
        "error": None,
    }


def run_fresh(
    notes_path: Path,
    spec_path: Path,
    device: str,
    use_pretrained: bool,
    perf_evidence: bool = False,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """`python -m ab_runtime.optimize.confirm` in a new process (this interpreter); its RESULT, or an error.
    (Started from here, not from confirm.py: confirm imports perf_run, which imports this module.)"""
    argv = (
        [
            sys.executable,
            "-m",
            "ab_runtime.optimize.confirm",
            "--device",
            device,
            "--notes",
            str(Path(notes_path).resolve()),
            "--spec",
            str(Path(spec_path).resolve()),
        ]
        + (["--use-pretrained"] if use_pretrained else [])
        + (["--perf-evidence"] if perf_evidence else [])
    )
    proc = subprocess.run(argv, cwd=PACKAGE_PARENT, capture_output=True, text=True, timeout=timeout_s)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    sys.stdout.write("".join(f"{ln}\n" for ln in proc.stdout.splitlines() if not ln.startswith(RESULT_MARKER)))
    sys.stderr.write(proc.stderr)
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines else {}
    phases.add_reported(result.get("phases"))  # the confirmation's time, in this run's profile
    if proc.returncode != 0 or not result.get("ok"):
        raise harness.HarnessError(
            f"the confirmation run failed (exit {proc.returncode}): {result.get('error') or proc.stderr.strip()[-200:]}"
        )
    return result


class PassSelectionError(harness.HarnessError):
    """`--passes` names a pass the catalogue lacks or one of another device: bad input (exit 2)."""


def main(argv: list[str]) -> int:
    return run_main(
        lambda: run(parse_args(argv)),
        failures=(harness.HarnessError, RuntimeDiagnosis),
        bad_input=(PassSelectionError,),
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
