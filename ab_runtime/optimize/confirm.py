"""The confirmation run: a fresh process re-measures baseline vs the search's selection.

    python -m ab_runtime.optimize.confirm --device cpu [--notes optimization_notes.json] [--pairs 15] ...

The search measures every candidate and keeps the best-looking one, so the selection's own
figure is the maximum of noisy measurements (winner's curse: on a loaded machine the search
once reported x32 for a configuration that re-measured at x0.64). This run builds the baseline
and the selected configuration anew in a new process, times them paired and interleaved one
block pair at a time until quick.decide decides (the search's rule, at most
quick.CONFIRM_MAX_PAIRS pairs: one pair the host's load made at or below the bar does not reject a
real gain on its own), and writes the result into the notes: `confirmation` (the figures),
`final` (pairstats.confirmed_final: the confirmed speedup and interval, or `no_gain` with the
baseline kept) and `chosen`.
The search (ab_runtime.optimize) starts this run itself when it finishes (optimize.run_fresh).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from .. import device as ab_device
from .. import harness, pairstats, phases
from ..errors import RuntimeDiagnosis
from ..result import emit_result
from . import passes, perf_run, quick
from .optimize import sequential_against_baseline


def apply_confirmation(notes: dict[str, Any], figures: dict[str, Any] | None, max_pairs: int) -> dict[str, Any]:
    """Notes with `confirmation`, `final`, `chosen` and `runtime_only` set from `figures`."""
    selection = notes["selection"]
    kinds = {r["name"]: r.get("kind", "") for r in notes["passes"] if isinstance(r, dict) and "name" in r}
    if figures is None:
        confirmation: dict[str, Any] = {"measured": False, "passes": [], "reason": "nothing was selected"}
    else:
        confirmation = {
            "measured": True,
            "passes": list(selection["passes"]),
            "process": "fresh",
            "max_pairs": max_pairs,
            "paired": figures,
        }
    final = pairstats.confirmed_final(selection, figures, kinds, float(notes["settings"]["min_gain"]))
    changes = {r["name"]: bool(r.get("changes_code")) for r in notes["passes"] if isinstance(r, dict) and "name" in r}
    return {
        **notes,
        "confirmation": confirmation,
        "final": final,
        "chosen": list(final["passes"]),
        "runtime_only": not any(changes.get(n) for n in final["passes"]),
    }


def load_note(figures: dict[str, Any]) -> str:
    """What the host's load cost this paired measurement (harness.paired's re-timed blocks), or ""."""
    if not figures.get("retaken_blocks"):
        return ""
    unclean, uneven = figures.get("unclean_blocks", 0), figures.get("uneven_blocks", 0)
    kept = f", {unclean} kept without a clean call on both sides ({uneven} uneven)" if unclean else ""
    return f"; {figures['retaken_blocks']} block(s) re-timed for a call the scheduler interrupted{kept}"


def perf_argv(
    notes_path: Path, spec_path: Path, device: str, use_pretrained: bool, pairs: int, iters: int
) -> list[str]:
    """accuracy_run_perf.py's arguments as the stage gives them, from the search's settings."""
    settings = json.loads(Path(notes_path).read_text())["settings"]
    workload = settings.get("workload")
    return (
        [
            "--device",
            device,
            "--pairs",
            str(pairs),
            "--iters",
            str(iters),
            "--warmup",
            str(settings["warmup"]),
            "--num-samples",
            str(settings["num_samples"]),
            "--spec",
            str(spec_path),
            "--out-dir",
            str(Path(notes_path).parent),
        ]
        + (["--workload", workload] if workload else [])
        + (["--use-pretrained"] if use_pretrained else [])
    )


def confirm(
    notes_path: Path,
    spec_path: Path,
    device: str,
    use_pretrained: bool,
    pairs: int | None,
    iters: int | None,
    perf_evidence: bool = False,
) -> dict[str, Any]:
    """Confirm the selection. With `perf_evidence` the confirmation IS the perf run
    (perf_run.evidence, the code accuracy_run_perf.py wraps): one fresh process builds and compiles
    the selection once, its pairs are both the confirmation and the perf evidence's timing, and
    the RESULT is kept as `confirmation.perf_result` when the selection is confirmed (its files
    are removed when it is not: the stage then runs the baseline's perf evidence)."""
    notes = json.loads(Path(notes_path).read_text())
    settings = notes["settings"]
    pairs = pairs or quick.CONFIRM_MAX_PAIRS
    iters = iters or int(settings["iters_per_block"])
    chosen = list(notes["selection"]["passes"])
    min_gain = float(settings["min_gain"])

    def decided(speedups: list[float]) -> bool:
        return quick.decide(speedups, min_gain, pairs) != "continue"

    figures = perf_result = None
    if chosen and perf_evidence:
        argv = perf_argv(notes_path, spec_path, device, use_pretrained, pairs, iters)
        perf_result, figures = perf_run.evidence(perf_run.parse_args(argv), chosen, decided)
    elif chosen:
        session = harness.open_session(
            spec_path, device, use_pretrained, num_samples=1, workload=settings.get("workload")
        )
        warmup = int(settings["warmup"])
        figures = sequential_against_baseline(session, passes.get(chosen), pairs, warmup, iters, decided)
    if figures is not None:
        harness.say(
            f"confirmation {'+'.join(chosen)} vs baseline (fresh process): x{figures['speedup']:.3f} "
            f"(interval {figures['interval'][0]:.3f}..{figures['interval'][1]:.3f}); the search said "
            f"x{notes['selection']['speedup']:.3f}{load_note(figures)}"
        )
    notes = apply_confirmation(notes, figures, pairs)
    if perf_result is not None and notes["chosen"] == chosen:
        notes["confirmation"]["perf_result"] = perf_result
    elif perf_result is not None:  # evidence of a configuration that is not chosen must not survive
        for key in ("metrics", "outputs", "trace"):
            (Path(notes_path).parent / perf_result[key]).unlink(missing_ok=True)
    harness.write_json(Path(notes_path), notes)
    final = notes["final"]
    harness.say(f"final: {'+'.join(final['passes']) or 'baseline (no gain)'}, x{final['speedup']:.3f}")
    return {
        "ok": True,
        "outcome": final["outcome"],
        "chosen": notes["chosen"],
        "speedup": final["speedup"],
        "selection_speedup": final.get("selection_speedup"),
        "error": None,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Confirm the search's selection in a fresh paired run.")
    p.add_argument("--device", default="cpu", choices=ab_device.DEVICE_CHOICES)
    p.add_argument(
        "--pairs",
        type=int,
        default=None,
        help=f"the most pairs, taken until the search's rule decides (default {quick.CONFIRM_MAX_PAIRS})",
    )
    p.add_argument("--iters", type=int, default=None, help="default: the search's")
    p.add_argument("--use-pretrained", action="store_true")
    p.add_argument(
        "--perf-evidence",
        action="store_true",
        help="also write the perf evidence (perf_*) from the same pairs, as accuracy_run_perf.py does",
    )
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--notes", default="optimization_notes.json")
    args = p.parse_args(argv)
    if (args.pairs is not None and args.pairs < 5) or (args.iters is not None and args.iters < 1):
        raise harness.HarnessError("--pairs must be >= 5 and --iters >= 1")
    return args


def main(argv: list[str]) -> int:
    phases.process_started()
    result: dict[str, Any] = {"ok": False, "error": None}
    try:
        args = parse_args(argv)
        result = confirm(
            Path(args.notes),
            Path(args.spec),
            args.device,
            args.use_pretrained,
            args.pairs,
            args.iters,
            args.perf_evidence,
        )
        code = 0
    except SystemExit:
        raise
    except (harness.HarnessError, RuntimeDiagnosis, FileNotFoundError, KeyError, ValueError) as exc:
        message = (
            f"the notes have no {exc} (not written by ab_runtime.optimize)" if isinstance(exc, KeyError) else str(exc)
        )
        print(f"error: {message}", file=sys.stderr)
        result["error"], code = (message.splitlines() or [type(exc).__name__])[0], 1
    except Exception as exc:  # model code failed: keep the traceback
        traceback.print_exc()
        result["error"], code = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    emit_result(result)  # with this process's phases, which the search adds to its own (optimize.run_fresh)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
