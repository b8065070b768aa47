"""Operator coverage before hardware (docs/operators.md).

    uv run scripts/op_coverage.py build-table --wheel PATH [--url URL]    (a torch_npu wheel on disk)
    uv run scripts/op_coverage.py build-table --download VERSION          (pip download from PyPI, x86_64)
    uv run scripts/op_coverage.py tables                                  (the stored releases, their sizes)
    uv run scripts/op_coverage.py gaps --adapt NAME [--release R] [--json] (one model's gap report)
    uv run scripts/op_coverage.py compare --adapt NAME OLD NEW            (the gaps a release closes)
    uv run scripts/op_coverage.py worklist [--release R] [--json]         (the ops blocking most models)

Every table is stored as ascendbridge/operators/data/torch_npu-<version>.json with the wheel's
URL, sha256 and how it was derived.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ascendbridge.cli_errors import EXIT_FAILURE, CliError, OneLineParser, run_cli
from ascendbridge.config import adaptations_dir
from ascendbridge.gatekit.evidence import EvidenceError, resolve_adaptation
from ascendbridge.operators import gaps as op_gaps
from ascendbridge.operators import table as op_table
from ascendbridge.operators import worklist as op_worklist

PYPI_FILES = "https://pypi.org/project/torch-npu/{version}/#files"


def download_wheel(version: str, into: Path) -> Path:
    """torch_npu==VERSION for CPython 3.11 manylinux x86_64, no dependencies (pip download)."""
    platforms = ["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64"]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *platforms]
    cmd += ["--python-version", "3.11", f"torch_npu=={version}", "-d", str(into)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wheels = sorted(into.glob("torch_npu-*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise CliError(f"pip download torch_npu=={version} failed: {tail[0]}", EXIT_FAILURE)
    return wheels[0]


def _build(args: argparse.Namespace) -> int:
    wheel, url = args.wheel, args.url
    with tempfile.TemporaryDirectory() as tmp:
        if args.download:
            wheel = download_wheel(args.download, Path(tmp))
            url = url or PYPI_FILES.format(version=args.download)
        elif not Path(wheel).is_file():
            raise CliError(f"no wheel at {wheel}")
        table = op_table.build_table(Path(wheel), url)
    path = op_table.save_table(table, Path(args.data_dir))
    print(f"torch_npu {table.release}: {json.dumps(table.counts())} -> {path}")
    return 0


def _tables(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    for release in op_table.releases(data_dir):
        t = op_table.load_table(release, data_dir)
        print(f"torch_npu {release}: {t.counts()} sha256 {t.source.get('sha256')}")
    return 0


def _profile(name: str) -> dict:
    """The op profile the benchmark stage recorded for adaptation NAME."""
    directory = resolve_adaptation(name, adaptations_dir())
    path = directory / "op_profile.json"
    if not path.is_file():
        raise CliError(f"{name}: no op_profile.json (the benchmark stage records it)", EXIT_FAILURE)
    return json.loads(path.read_text())


def _gaps(args: argparse.Namespace) -> int:
    profile, table = _profile(args.adapt), op_table.load_table(args.release, Path(args.data_dir))
    report = op_gaps.gap_report(profile, table)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['model_id']} on torch_npu {report['release']}: {report['ops']} ops, covered {report['covered']}")
    for gap in report["gaps"]:
        where = f"in {gap['module']}; dtypes {', '.join(gap['dtypes'] or [])}"
        print(f"  {gap['op']}: {gap['remedy']['class']} ({gap['calls']} calls, {gap['cpu_share']:.2%} CPU, {where})")
    for gap in report["dtype_gaps"]:
        refused, taken = ", ".join(gap["dtypes"]), ", ".join(gap["takes"])
        print(f"  {gap['op']}: refuses {refused} (takes {taken}), in {gap['module']}")
    print(f"{len(report['gaps'])} gap(s), {len(report['dtype_gaps'])} dtype gap(s)")
    for op, record in profile["ops"].items():  # the release's own dtype checks, as text (table.dtype_checks)
        for message in table.dtype_checks.get(op.partition(".")[0], []):
            print(f"  torch_npu checks {op} (used in {', '.join(record.get('dtypes') or [])}): {message}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    result = op_gaps.compare(
        _profile(args.adapt), op_table.load_table(args.old, data_dir), op_table.load_table(args.new, data_dir)
    )
    print(json.dumps(result, indent=1))
    return 0


def _worklist(args: argparse.Namespace) -> int:
    reports = op_worklist.model_reports(adaptations_dir())
    rows = op_worklist.worklist(reports, args.release)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"torch_npu {args.release}: {len(reports)} model(s) with operator reports, {len(rows)} missing op(s)")
    for row in rows:
        print(
            f"  {row['op']}: {len(row['models'])} model(s) ({', '.join(row['models'])}); "
            f"remedy {', '.join(row['remedies'])}; CPU share {row['cpu_share']:.2%}"
        )
    return 0


def main(argv: list[str]) -> int:
    """Exit 0 done, 1 a download or lookup failed, 2 bad input (one `error:` line)."""
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(op_table.DATA_DIR), help="where the tables are stored")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-table", help="build and store one release's operator table")
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", help="a torch_npu wheel on disk")
    source.add_argument("--download", metavar="VERSION", help="download torch_npu==VERSION from PyPI first")
    build.add_argument("--url", help="where the wheel came from (recorded in the table)")
    build.set_defaults(run=_build)
    sub.add_parser("tables", help="the stored releases").set_defaults(run=_tables)
    gaps = sub.add_parser("gaps", help="one adaptation's gap report")
    gaps.add_argument("--adapt", required=True)
    gaps.add_argument("--release", default=op_table.PINNED_RELEASE)
    gaps.add_argument("--json", action="store_true")
    gaps.set_defaults(run=_gaps)
    compare = sub.add_parser("compare", help="the gaps a newer release closes for one adaptation")
    compare.add_argument("--adapt", required=True)
    compare.add_argument("old")
    compare.add_argument("new")
    compare.set_defaults(run=_compare)
    work = sub.add_parser("worklist", help="the ops that block the most models")
    work.add_argument("--release", default=op_table.PINNED_RELEASE)
    work.add_argument("--json", action="store_true")
    work.set_defaults(run=_worklist)
    return run_cli(argv, parser, (op_table.TableError, EvidenceError))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
