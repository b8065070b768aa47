"""The confirmation run: a fresh process re-measures baseline vs the search's selection.

    python -m ab_runtime.optimize.confirm --device cpu [--notes optimization_notes.json] [--pairs 5] ...

The search measures every candidate and keeps the best-looking one, so the selection's own
figure is the maximum of noisy measurements (winner's curse: on a loaded machine the search
once reported x32 for a configuration that re-measured at x0.64). This run builds the baseline
and the selected configuration anew in a new process, times them paired and interleaved, and
writes the result into the notes: `confirmation` (the figures), `final` (pairstats.confirmed_final:
the confirmed speedup and interval, or `no_gain` with the baseline kept) and `chosen`.
The search (ab_runtime.optimize) starts this run itself when it finishes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from .. import RESULT_MARKER, harness, pairstats
from .. import device as ab_device
from ..errors import RuntimeDiagnosis
from . import passes

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding ab_runtime/


def apply_confirmation(notes: dict[str, Any], figures: dict[str, Any] | None, pairs: int) -> dict[str, Any]:
    """Notes with `confirmation`, `final`, `chosen` and `runtime_only` set from `figures`."""
    selection = notes["selection"]
    kinds = {r["name"]: r.get("kind", "") for r in notes["passes"] if isinstance(r, dict) and "name" in r}
    if figures is None:
        confirmation: dict[str, Any] = {"measured": False, "passes": [], "reason": "nothing was selected"}
    else:
        confirmation = {"measured": True, "passes": list(selection["passes"]), "process": "fresh", "pairs": pairs,
                        "paired": figures}
    final = pairstats.confirmed_final(selection, figures, kinds, float(notes["settings"]["min_gain"]))
    changes = {r["name"]: bool(r.get("changes_code")) for r in notes["passes"] if isinstance(r, dict) and "name" in r}
    return {**notes, "confirmation": confirmation, "final": final, "chosen": list(final["passes"]),
            "runtime_only": not any(changes.get(n) for n in final["passes"])}


def confirm(notes_path: Path, spec_path: Path, device: str, use_pretrained: bool, pairs: int | None,
            iters: int | None) -> dict[str, Any]:
    notes = json.loads(Path(notes_path).read_text())
    settings = notes["settings"]
    pairs = pairs or int(settings["pairs"])
    iters = iters or int(settings["iters_per_block"])
    chosen = list(notes["selection"]["passes"])
    figures = None
    if chosen:
        session = harness.open_session(spec_path, device, use_pretrained, num_samples=1,
                                       workload=settings.get("workload"))
        figures = harness.paired_against_baseline(session, passes.get(chosen), pairs, int(settings["warmup"]), iters)
        harness.say(f"confirmation {'+'.join(chosen)} vs baseline (fresh process): x{figures['speedup']:.3f} "
                    f"(interval {figures['interval'][0]:.3f}..{figures['interval'][1]:.3f}); the search said "
                    f"x{notes['selection']['speedup']:.3f}")
    notes = apply_confirmation(notes, figures, pairs)
    harness.write_json(Path(notes_path), notes)
    final = notes["final"]
    harness.say(f"final: {'+'.join(final['passes']) or 'baseline (no gain)'}, x{final['speedup']:.3f}")
    return {"ok": True, "outcome": final["outcome"], "chosen": notes["chosen"], "speedup": final["speedup"],
            "selection_speedup": final.get("selection_speedup"), "error": None}


def run_fresh(notes_path: Path, spec_path: Path, device: str, use_pretrained: bool,
              timeout_s: float = 1800.0) -> dict[str, Any]:
    """`python -m ab_runtime.optimize.confirm` in a new process (this interpreter); its RESULT, or an error."""
    argv = [sys.executable, "-m", "ab_runtime.optimize.confirm", "--device", device, "--notes", str(Path(notes_path).resolve()),
            "--spec", str(Path(spec_path).resolve())] + (["--use-pretrained"] if use_pretrained else [])
    proc = subprocess.run(argv, cwd=PACKAGE_PARENT, capture_output=True, text=True, timeout=timeout_s)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    sys.stdout.write("".join(f"{ln}\n" for ln in proc.stdout.splitlines() if not ln.startswith(RESULT_MARKER)))
    sys.stderr.write(proc.stderr)
    result = json.loads(lines[-1][len(RESULT_MARKER):]) if lines else {}
    if proc.returncode != 0 or not result.get("ok"):
        raise harness.HarnessError(f"the confirmation run failed (exit {proc.returncode}): "
                                   f"{result.get('error') or proc.stderr.strip()[-200:]}")
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Confirm the search's selection in a fresh paired run.")
    p.add_argument("--device", default="cpu", choices=ab_device.DEVICE_CHOICES)
    p.add_argument("--pairs", type=int, default=None, help="default: the search's")
    p.add_argument("--iters", type=int, default=None, help="default: the search's")
    p.add_argument("--use-pretrained", action="store_true")
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--notes", default="optimization_notes.json")
    args = p.parse_args(argv)
    if (args.pairs is not None and args.pairs < 5) or (args.iters is not None and args.iters < 1):
        raise harness.HarnessError("--pairs must be >= 5 and --iters >= 1")
    return args


def main(argv: list[str]) -> int:
    result: dict[str, Any] = {"ok": False, "error": None}
    try:
        args = parse_args(argv)
        result = confirm(Path(args.notes), Path(args.spec), args.device, args.use_pretrained, args.pairs, args.iters)
        code = 0
    except SystemExit:
        raise
    except (harness.HarnessError, RuntimeDiagnosis, FileNotFoundError, KeyError, ValueError) as exc:
        message = f"the notes have no {exc} (not written by ab_runtime.optimize)" if isinstance(exc, KeyError) else str(exc)
        print(f"error: {message}", file=sys.stderr)
        result["error"], code = (message.splitlines() or [type(exc).__name__])[0], 1
    except Exception as exc:  # model code failed: keep the traceback
        traceback.print_exc()
        result["error"], code = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    print(RESULT_MARKER + json.dumps(result, sort_keys=True, default=str), flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
