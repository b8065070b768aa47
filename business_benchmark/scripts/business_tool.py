"""Business evidence tools.

    uv run business_benchmark/scripts/business_tool.py compare A.json B.json [--json]
    uv run business_benchmark/scripts/business_tool.py aggregate [--out-dir DIR] [--json]

compare: two business_metrics_*.json files side by side (e.g. one from an Ascend host, one from
a CUDA host): task metrics, agreement, items/s and tokens/s, and each side's verdict.
aggregate: every adaptation's business evidence -> business_summary.{json,csv} and
business_scores.png under --out-dir (default business_benchmark/reports).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ascendbridge.cli.evidence_tool import add_compare, aligned, tool_parser
from ascendbridge.cli_errors import run_cli
from ascendbridge.config import REPO_ROOT, adaptations_dir
from business_benchmark.datasets import DatasetError
from business_benchmark.evidence import read_metrics
from business_benchmark.report import collect, compare, write_figure, write_reports


def _fmt(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else ("-" if value is None else str(value))


# The compare table: each row's figures after its set and metric.
COMPARED_FIGURES = ("a", "b", "a_items_per_s", "b_items_per_s")


def cmd_compare(args: argparse.Namespace) -> int:
    result = compare(read_metrics(Path(args.a)), read_metrics(Path(args.b)))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for label in ("a", "b"):
        s = result[label]
        print(
            f"{label.upper()}: {s['device']} ({s['device_name']}) {s['dtype']}, {s['weights']} weights, verdict {s['verdict']}"
        )
    rows = [("set", "metric", "A", "B", "A items/s", "B items/s")]
    rows += [(r["set"], r["metric"], *(_fmt(r[k]) for k in COMPARED_FIGURES)) for r in result["rows"]]
    print("\n".join(aligned(rows, left=2)))
    for note in result["notes"]:
        print(f"note: {note}")
    return 0


def cmd_aggregate(args: argparse.Namespace) -> int:
    rows, skipped = collect(adaptations_dir())
    files = write_reports(rows, skipped, Path(args.out_dir)) + write_figure(rows, Path(args.out_dir))
    if args.json:
        print(json.dumps({"rows": len(rows), "skipped": skipped, "files": [str(p) for p in files]}))
    else:
        print(f"{len(rows)} metric row(s), {len(skipped)} skipped file(s)")
        for path in files:
            print(f"  {path}")
    return 0


def main(argv: list[str]) -> int:
    """Exit 0 done, 2 bad input (not business evidence, unreadable files): one `error:` line."""
    parser, sub = tool_parser(
        __doc__.splitlines()[0],
        cmd_aggregate,
        REPO_ROOT / "business_benchmark" / "reports",
        "report across every adaptation's business evidence",
    )
    add_compare(sub, cmd_compare, "two business evidence files side by side")
    return run_cli(argv, parser, (DatasetError,))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
