"""Schema and internal consistency of optimization_notes.json (framework side, no torch).

Every paired row is recomputed from its raw samples with the runtime's own statistics module
(loaded by path from THIS repository, never the adaptation's copy): medians, the speedup as the
ratio of the medians, the per-pair speedups, the interval and the noise; a search row's length
must follow the quick search's stopping rule (ab_runtime/optimize/quick.py: stopped at the first
pair that decides, or at settings.pairs), and so must the confirmation's (at most its
`max_pairs`, itself at most quick.CONFIRM_MAX_PAIRS). The keep decision is re-derived from the figures and
the accuracy verdict; a pass left unbuilt as outranked must be one quick.outranked rules out
from the rows before it; the search's selection must be one of the
measured rows (same passes, same figures) against the baseline; the final result must be what
the fresh confirmation run's figures give (recomputed with pairstats.confirmed_final: kept only
when the confirmed interval clears 1 + min_gain); warmup is a single figure applied to both
sides and equal to the settings'.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ab_runtime.optimize import quick
from ab_runtime.optimize.notes_file import notes_problem
from ascendbridge.gatekit.compare import recorded_matches

RUNTIME_DIR = Path(__file__).resolve().parents[1] / "ab_runtime"
FIGURES = (
    "pairs",
    "warmup",
    "iters_per_block",
    "baseline_median_ms",
    "candidate_median_ms",
    "speedup",
    "pair_speedups",
    "interval",
    "baseline_noise",
)


def pairstats() -> ModuleType:
    """The framework's ab_runtime/pairstats.py (pure Python), loaded under a private name."""
    key = "ascendbridge_framework_pairstats"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, RUNTIME_DIR / "pairstats.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def check_paired(
    label: str, figures: Any, settings: dict[str, Any], sequential: bool = False, max_pairs: int | None = None
) -> list[str]:
    """Recompute one paired result from its samples; every reported figure must match. A search
    row or the confirmation (`sequential`) may have stopped early, only where quick.decide decided
    with `max_pairs` (default settings.pairs; re-derived here), and may have set aside at most
    quick.SET_ASIDE pairs the load left without a clean call (not in its samples: the stop is
    re-derived from the pairs that count)."""
    if not isinstance(figures, dict):
        return [f"{label}.paired: missing"]
    missing = [k for k in (*FIGURES, "baseline_samples_ms", "candidate_samples_ms") if k not in figures]
    if missing:
        return [f"{label}.paired: missing {', '.join(missing)}"]
    problems = []
    pairs, iters = figures["pairs"], figures["iters_per_block"]
    base, cand = figures["baseline_samples_ms"], figures["candidate_samples_ms"]
    if figures["warmup"] != settings.get("warmup"):
        problems.append(
            f"{label}: warmup {figures['warmup']} != settings.warmup {settings.get('warmup')} "
            "(warmup must be symmetric and as configured)"
        )
    if not isinstance(pairs, int) or pairs < (1 if sequential else quick.MIN_PAIRS):
        problems.append(f"{label}: {pairs} pairs (at least {1 if sequential else quick.MIN_PAIRS} required)")
    ok_lists = all(
        isinstance(s, list) and s and all(isinstance(x, (int, float)) and x > 0 for x in s) for s in (base, cand)
    )
    if (
        not ok_lists
        or not isinstance(iters, int)
        or iters < 1
        or len(base) != len(cand)
        or len(base) != (pairs if isinstance(pairs, int) else 0) * iters
    ):
        return problems + [f"{label}: samples are not {pairs} pairs x {iters} positive latencies on both sides"]
    recomputed = (
        pairstats()
        .summarize_pairs(
            [base[i * iters : (i + 1) * iters] for i in range(pairs)],
            [cand[i * iters : (i + 1) * iters] for i in range(pairs)],
            figures["warmup"],
        )
        .as_dict()
    )
    for key in FIGURES:
        if not recorded_matches(recomputed[key], figures[key]):
            problems.append(
                f"{label}.paired.{key}: reported {figures[key]!r}, recomputed from the samples {recomputed[key]!r}"
            )
    aside = figures.get("set_aside_pair_speedups", [])
    if sequential and (
        not isinstance(aside, list)
        or len(aside) > quick.SET_ASIDE
        or not all(isinstance(x, (int, float)) and x > 0 for x in aside)
    ):
        problems.append(
            f"{label}: set_aside_pair_speedups is not a list of at most {quick.SET_ASIDE} positive speedups"
        )
    if sequential and not problems:
        try:
            bound = int(settings.get("pairs", 0)) if max_pairs is None else max_pairs
            early = quick.stopped_where_decided(
                recomputed["pair_speedups"], float(settings.get("min_gain", 0.0)), bound
            )
        except (TypeError, ValueError) as exc:
            early = str(exc)
        if early:
            problems.append(f"{label}: not the search's stopping rule: {early}")
    return problems


def _row_label(kind: str, i: int, row: dict[str, Any]) -> str:
    return f"{kind}[{i}] ({'+'.join(row.get('passes') or []) or row.get('name', '?')})"


def check_row(label: str, row: Any, settings: dict[str, Any]) -> list[str]:
    if not isinstance(row, dict) or not isinstance(row.get("passes"), list):
        return [f"{label}: not a row with a passes list"]
    if not isinstance(row.get("kept"), bool) or not isinstance(row.get("reason"), str) or not row["reason"]:
        return [f"{label}: kept (bool) and reason (text) are required"]
    if not row.get("measured"):
        return [f"{label}: kept without being measured"] if row["kept"] else []
    problems = check_paired(label, row.get("paired"), settings, sequential=True)
    acc = row.get("accuracy")
    if not isinstance(acc, dict) or acc.get("verdict") not in ("pass", "fail"):
        return problems + [f"{label}: accuracy verdict missing"]
    if not problems:
        keep, _ = pairstats().gain_decision(row["paired"], acc["verdict"], settings.get("min_gain", 0.0))
        if keep != row["kept"]:
            problems.append(f"{label}: kept={row['kept']} but the figures and accuracy say kept={keep}")
    if "cold_start" not in row:
        problems.append(f"{label}: cold_start missing")
    return problems


def check_outranked(rows: list[Any], settings: dict[str, Any]) -> list[str]:
    """A pass the search left unbuilt as outranked (quick.outranked) must be one the rule rules out,
    from the rows measured before it (their figures already recomputed), with the figures it recorded;
    and none with settings.measure_all."""
    problems = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "outranked_by" not in row:
            continue
        label = _row_label("passes", i, row)
        if settings.get("measure_all"):
            problems.append(f"{label}: left unbuilt although settings.measure_all is set")
            continue
        try:
            why = quick.outranked(str(row.get("name")), row.get("group"), [r for r in rows[:i] if isinstance(r, dict)])
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            problems.append(f"{label}: the rows before it cannot be read for the outranking rule ({exc})")
            continue
        recorded = {key: row.get(key) for key in ("outranked_by", "expected_gain", "kept_low", "kept_cost_s")}
        if why is None:
            problems.append(
                f"{label}: left unbuilt as outranked by {row['outranked_by']}, but no kept pass before it outranks it"
            )
        elif not recorded_matches(why, recorded):
            problems.append(f"{label}: outranked figures {recorded} differ from the rule's {why}")
    return problems


def check_selection(notes: dict[str, Any]) -> list[str]:
    """The search's selection is one of its measured rows against the baseline (or nothing, honestly)."""
    selection = notes["selection"]
    if not isinstance(selection, dict) or not isinstance(selection.get("passes"), list):
        return ["selection: malformed"]
    chosen = selection["passes"]
    singles = {r.get("name"): r for r in notes["passes"] if isinstance(r, dict)}
    if not chosen:
        problems = [] if selection.get("outcome") == "no_gain" else ["nothing selected but outcome is not 'no_gain'"]
        kept = [n for n, r in singles.items() if r.get("kept")]
        if kept:
            problems.append(f"nothing selected although pass(es) {', '.join(str(n) for n in kept)} were kept")
        if selection.get("speedup") != 1.0:
            problems.append("selecting nothing must report speedup 1.0")
        return problems
    problems = [] if selection.get("outcome") == "gain" else ["passes selected but outcome is not 'gain'"]
    for name in chosen:
        if not (singles.get(name) or {}).get("kept"):
            problems.append(f"selected pass {name} was not kept on its own")
    rows = [
        r
        for r in notes["passes"] + notes["combination"]
        if isinstance(r, dict)
        and r.get("measured")
        and r.get("kept")
        and not r.get("against")
        and sorted(r.get("passes") or []) == sorted(chosen)
    ]
    match = next(
        (
            r
            for r in rows
            if recorded_matches(r["paired"]["speedup"], selection.get("speedup"))
            and recorded_matches(r["paired"]["baseline_median_ms"], selection.get("baseline_median_ms"))
            and recorded_matches(r["paired"]["candidate_median_ms"], selection.get("optimized_median_ms"))
        ),
        None,
    )
    if match is None:
        problems.append(
            "selection is not one of the measured rows against the baseline "
            "(same passes, kept, same speedup and medians)"
        )
    return problems


def check_final(notes: dict[str, Any]) -> list[str]:
    """`final` is exactly what the fresh confirmation run's figures give (pairstats.confirmed_final)."""
    selection, confirmation, final = notes["selection"], notes["confirmation"], notes["final"]
    if not isinstance(confirmation, dict) or not isinstance(final, dict):
        return ["confirmation / final: malformed"]
    figures = None
    if selection.get("passes"):
        if not confirmation.get("measured") or sorted(confirmation.get("passes") or []) != sorted(selection["passes"]):
            return ["the selection was not confirmed by a fresh measurement of the same passes"]
        bound = confirmation.get("max_pairs")
        if not isinstance(bound, int) or not quick.MIN_PAIRS <= bound <= quick.CONFIRM_MAX_PAIRS:
            return [f"confirmation.max_pairs {bound!r} is not {quick.MIN_PAIRS}..{quick.CONFIRM_MAX_PAIRS}"]
        problems = check_paired("confirmation", confirmation.get("paired"), notes["settings"], True, bound)
        if problems:
            return problems
        figures = confirmation["paired"]
    kinds = {r.get("name"): r.get("kind", "") for r in notes["passes"] if isinstance(r, dict)}
    expected = pairstats().confirmed_final(selection, figures, kinds, notes["settings"].get("min_gain", 0.0))
    if not recorded_matches(expected, final):
        diff = sorted(k for k in set(expected) | set(final) if not recorded_matches(expected.get(k), final.get(k)))
        return [f"final does not follow from the confirmation run (differs at: {', '.join(diff)})"]
    if sorted(notes["chosen"]) != sorted(final["passes"]):
        return [f"chosen {notes['chosen']} != final.passes {final['passes']}"]
    return []


def check_notes(notes: Any) -> list[str]:
    """All problems in one notes document (the wrapper is checked by ascendbridge.gatekit.integrity)."""
    problem = notes_problem(notes)
    if problem:
        return [problem]
    settings = notes["settings"]
    if not isinstance(settings, dict) or settings.get("profiler_during_timing") is not False:
        return ["settings: profiler_during_timing must be recorded as false"]
    if not isinstance(notes["passes"], list) or not isinstance(notes["combination"], list):
        return ["passes / combination must be lists"]
    problems: list[str] = []
    for kind in ("passes", "combination"):
        for i, row in enumerate(notes[kind]):
            problems += check_row(_row_label(kind, i, row if isinstance(row, dict) else {}), row, settings)
    if not problems:
        problems += check_outranked(notes["passes"], settings)
    selection_problems = check_selection(notes)
    problems += selection_problems or check_final(notes)
    changes = {r.get("name"): r.get("changes_code") for r in notes["passes"] if isinstance(r, dict)}
    expected_runtime_only = not any(changes.get(n) for n in notes["chosen"])
    if notes["runtime_only"] is not expected_runtime_only:
        problems.append(f"runtime_only={notes['runtime_only']} but the chosen passes say {expected_runtime_only}")
    env = notes["environment"]
    if not isinstance(env, dict) or not all(k in env for k in ("torch", "python", "device_name")):
        problems.append("environment: torch, python and device_name are required")
    return problems
