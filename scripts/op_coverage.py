"""Operator coverage before hardware (docs/operators.md).

    uv run scripts/op_coverage.py build-table --wheel PATH [--url URL]    (a torch_npu wheel on disk)
    uv run scripts/op_coverage.py build-table --download VERSION          (pip download from PyPI, x86_64)
    uv run scripts/op_coverage.py tables                                  (the stored releases, their sizes)

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

from ascendbridge.cli.errors import EXIT_FAILURE, CliError, OneLineParser, run_cli
from ascendbridge.operators import table as op_table

PYPI_FILES = "https://pypi.org/project/torch-npu/{version}/#files"


def download_wheel(version: str, into: Path) -> Path:
    """torch_npu==VERSION for CPython 3.11 manylinux x86_64, no dependencies (pip download)."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--python-version", "3.11",
           f"torch_npu=={version}", "-d", str(into)]
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
    return run_cli(argv, parser, (op_table.TableError,))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
