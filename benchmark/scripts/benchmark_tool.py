"""Benchmark evidence tools.

uv run benchmark/scripts/benchmark_tool.py aggregate [--out-dir DIR] [--figures-dir DIR]
uv run benchmark/scripts/benchmark_tool.py compare A.pt B.pt (--adapt NAME | --python PATH) [--json]
uv run benchmark/scripts/benchmark_tool.py hotspots TRACE.json [--top N] [--json]
uv run benchmark/scripts/benchmark_tool.py roofline NAME [--dtype D] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ab_runtime.metrics_file import find_metrics
from ascendbridge.board.store import BoardStore
from ascendbridge.cli.evidence_tool import add_compare, tool_parser
from ascendbridge.cli_errors import EXIT_FAILURE, CliError, run_guarded
from ascendbridge.config import REPO_ROOT, adaptations_dir, board_path
from ascendbridge.gatekit.checker import json_report
from ascendbridge.gatekit.envs import EnvError, adaptation_python, run_inner
from ascendbridge.gatekit.evidence import EvidenceError, resolve_adaptation
from ascendbridge.gatekit.trace import TraceError, load_trace
from benchmark.aggregate import collect, write_figures, write_reports
from benchmark.hotspots import analyse, format_report
from benchmark.probe import latest_probe
from benchmark.roofline import RooflineError, format_roofline, roofline


class ToolError(Exception):
    """One line for stderr."""


def cmd_aggregate(args: argparse.Namespace) -> int:
    rows, skipped = collect(adaptations_dir())
    reports = write_reports(rows, skipped, Path(args.out_dir))
    figures = write_figures(rows, Path(args.figures_dir))
    if args.json:
        print(json.dumps({"runs": len(rows), "skipped": skipped, "files": [str(p) for p in reports + figures]}))
    else:
        print(
            f"{len(rows)} benchmark run(s) from {adaptations_dir()}" + (f", {len(skipped)} skipped" if skipped else "")
        )
        for s in skipped:
            print(f"  skipped {s['file']}: {s['reason']}")
        for path in reports + figures:
            print(f"  wrote {path}")
    return 0


def _format_compare(result: dict[str, Any]) -> str:
    lines = [f"{'output':32s} {'verdict':7s} {'cosine':>10s} {'max abs':>10s} {'max rel':>10s} {'rmse':>10s}"]
    for name, out in result["outputs"].items():
        m = out["metrics"]
        if out["kind"] == "label":
            lines.append(f"{name[:32]:32s} {out['verdict']:7s} match rate {m['match_rate']:.4f}")
            continue
        cells = [
            f"{m[k]:10.6g}" if isinstance(m.get(k), (int, float)) else f"{'-':>10s}"
            for k in ("cosine", "max_abs_err", "max_rel_err", "rmse")
        ]
        lines.append(f"{name[:32]:32s} {out['verdict']:7s} " + " ".join(cells))
        lines += [f"    - {reason}" for reason in out["reasons"]]
    lines += [f"problem: {p}" for p in result["problems"]]
    applied = result["thresholds"]["applied"]
    lines.append(
        f"verdict {result['verdict'].upper()} (cosine >= {applied['cosine_min']}, max abs err <= "
        f"{applied['max_abs_err_scaled_max']:.3g} x output scale, target dtype {applied['target_dtype']})"
    )
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    for name in (args.a, args.b):
        if not Path(name).is_file():
            raise ToolError(f"{name}: file not found")
    directory = resolve_adaptation(args.adapt, adaptations_dir()) if args.adapt else Path(".")
    python = adaptation_python(directory, args.python)
    tolerances = "{}"
    if args.adapt and (directory / "adaptation.json").is_file():
        tolerances = json.dumps(json.loads((directory / "adaptation.json").read_text()).get("tolerances") or {})
    extra = ["--dtype", args.dtype] if args.dtype else []
    res = run_inner(
        python,
        "compare_outputs.py",
        [str(Path(args.a).resolve()), str(Path(args.b).resolve()), "--tolerances", tolerances, *extra],
    )
    result = json_report(res.output)
    if result is None:
        errors = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
        raise ToolError(errors[-1][len("error: ") :] if errors else f"comparison failed: {res.tail(2)}")
    print(json.dumps(result, indent=2) if args.json else _format_compare(result))
    return 0 if result["verdict"] == "pass" else 3


def cmd_hotspots(args: argparse.Namespace) -> int:
    report = analyse(load_trace(Path(args.trace)), limit=args.top)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def _pick_metrics(name: str, dtype: str | None) -> dict[str, Any]:
    directory = resolve_adaptation(name, adaptations_dir())
    sets = find_metrics(directory)
    if not sets:
        raise ToolError(f"{name} has no benchmark evidence yet (run the benchmark stage or accuracy_run.py)")
    if dtype is None:
        spec = (
            json.loads((directory / "adaptation.json").read_text()) if (directory / "adaptation.json").is_file() else {}
        )
        dtype = (spec.get("dtype") or {}).get("target", "float32")
    chosen = [s for s in sets if s.run.dtype == dtype]
    if not chosen:
        have = ", ".join(sorted({s.run.dtype for s in sets}))
        raise ToolError(f"{name} has no {dtype} run (have: {have}); pass --dtype")
    return max(chosen, key=lambda s: str(s.data.get("created_at"))).data


def cmd_roofline(args: argparse.Namespace) -> int:
    metrics = _pick_metrics(args.name, args.dtype)
    with BoardStore(board_path()) as store:
        probe = latest_probe(store, metrics["run"]["device"])
    result = roofline(metrics, probe)
    print(json.dumps(result, indent=2) if args.json else format_roofline(result))
    return 0


def parser() -> argparse.ArgumentParser:
    p, sub = tool_parser(
        "Benchmark evidence tools: aggregate, compare, hotspots, roofline.",
        cmd_aggregate,
        REPO_ROOT / "benchmark" / "reports",
        "all adaptations -> reports (JSON, CSV) and figures (PNG)",
        REPO_ROOT / "benchmark" / "figures",
    )
    c = add_compare(sub, cmd_compare, "accuracy table of B.pt against A.pt")
    env = c.add_mutually_exclusive_group(required=True)
    env.add_argument("--adapt", help="load the tensors with this adaptation's environment (and its tolerances)")
    env.add_argument("--python", help="load the tensors with this interpreter (must have torch)")
    c.add_argument("--dtype", help="dtype B was computed in (default: from the file)")
    h = sub.add_parser("hotspots", help="operators ranked by self time in a Chrome trace")
    h.add_argument("trace")
    h.add_argument("--top", type=int, default=20)
    h.add_argument("--json", action="store_true")
    h.set_defaults(run=cmd_hotspots)
    r = sub.add_parser("roofline", help="percent of attainable throughput vs the measured peaks")
    r.add_argument("name", help="adaptation name")
    r.add_argument("--dtype", help="which run (default: the spec's target dtype)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(run=cmd_roofline)
    return p


def _run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except RooflineError as exc:  # the board lacks what the figure needs (a probe): not the input's fault
        raise CliError(str(exc), EXIT_FAILURE) from None
    except (ToolError, EnvError, EvidenceError, TraceError, ValueError) as exc:
        raise CliError(str(exc)) from None


def main(argv: list[str]) -> int:
    """Exit 0 done, 1 the board or a run failed, 2 bad input (one `error:` line)."""
    return run_guarded(lambda: _run(argv))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
