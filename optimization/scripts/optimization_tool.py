"""Optimization evidence tools.

    uv run optimization/scripts/optimization_tool.py aggregate [--out-dir DIR] [--figures-dir DIR] [--json]
    uv run optimization/scripts/optimization_tool.py compare A B [--json]

aggregate: every adaptation's optimization_notes.json (under ASCENDBRIDGE_ADAPTATIONS) into
optimization_summary.json / .csv and optimization_speedup.png. compare: two adaptations (names,
or paths to notes files) side by side: final speedups and each pass's measured effect.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ab_runtime.optimize.notes_file import NOTES_FILE, read_notes
from ascendbridge.cli.evidence_tool import add_compare, aligned, tool_parser
from ascendbridge.cli_errors import run_cli
from ascendbridge.config import REPO_ROOT, adaptations_dir
from ascendbridge.gatekit.evidence import EvidenceError, resolve_adaptation
from optimization.aggregate import collect, compare, write_figure, write_reports


def _notes(ref: str) -> dict[str, Any]:
    path = Path(ref)
    if not path.is_file():
        path = resolve_adaptation(ref, adaptations_dir()) / NOTES_FILE
    try:
        return read_notes(path)
    except EvidenceError as exc:
        raise EvidenceError(f"{ref}: {exc}") from None  # which of the two compared


def _fmt(value: Any, spec: str = ".3f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _effect(side: dict[str, Any] | None) -> str:
    """A pass's speedup alone against the baseline, `*` when the search kept it."""
    side = side or {}
    return f"{_fmt(side.get('speedup'))}{'*' if side.get('kept') else ' '}"


def cmd_aggregate(args: argparse.Namespace) -> int:
    rows, skipped = collect(adaptations_dir())
    files = write_reports(rows, skipped, Path(args.out_dir)) + write_figure(rows, Path(args.figures_dir))
    if args.json:
        print(json.dumps({"models": len(rows), "skipped": skipped, "files": [str(p) for p in files]}))
        return 0
    print(f"{len(rows)} optimized model(s) from {adaptations_dir()}" + (f", {len(skipped)} skipped" if skipped else ""))
    for r in rows:
        print(
            f"  {r['adaptation']:28s} {r['outcome']:8s} x{_fmt(r['speedup'])} "
            f"({_fmt(r['interval_low'])}..{_fmt(r['interval_high'])}) {r['chosen'] or '-'}"
        )
    for s in skipped:
        print(f"  skipped {s['file']}: {s['reason']}")
    for path in files:
        print(f"  wrote {path}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = _notes(args.a), _notes(args.b)
    try:
        result = compare(a, b)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise EvidenceError(
            f"the notes files are malformed ({type(exc).__name__}: {exc}); check them with check_optimization_notes.py"
        ) from None
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    a, b = result["a"], result["b"]
    keys = ("device", "outcome", "chosen", "speedup", "baseline_median_ms", "optimized_median_ms", "accuracy")
    rows: list[tuple[str, ...]] = [("", a["adaptation"], b["adaptation"])]
    rows += [(key, *(_fmt(x[key]) if isinstance(x[key], float) else str(x[key]) for x in (a, b))) for key in keys]
    effects = [(f"  {name}", _effect(sides["a"]), _effect(sides["b"])) for name, sides in result["passes"].items()]
    lines = aligned([*rows, *effects])  # one table: the pass effects share the figures' columns
    print("\n".join(lines[: len(rows)]))
    print("pass effects (speedup alone vs baseline; * = kept):")
    print("\n".join(lines[len(rows) :]))
    return 0


def main(argv: list[str]) -> int:
    """Exit 0 done, 2 bad input (not notes files, unknown adaptations): one `error:` line."""
    parser, sub = tool_parser(
        __doc__.splitlines()[0],
        cmd_aggregate,
        REPO_ROOT / "reports",
        "report + figure over all adaptations",
        REPO_ROOT / "reports" / "figures",
    )
    add_compare(sub, cmd_compare, "two adaptations' notes side by side")
    return run_cli(argv, parser, (EvidenceError,))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
