"""The torch interpreter a command that measures this host runs (`scripts/env_probe.py`,
`training/scripts/host_acceptance.py`): an adaptation's synced environment (`--adapt NAME`) or any
interpreter with torch (`--python PATH`), on `--device`; a bad choice is refused before anything runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ascendbridge.cli_errors import CliError
from ascendbridge.config import REPO_ROOT, adaptations_dir
from ascendbridge.gatekit.envs import EnvError, adaptation_python
from ascendbridge.gatekit.evidence import EvidenceError, resolve_adaptation

DEVICES = ("auto", "npu", "cuda", "cpu")


def add_interpreter(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """`--adapt NAME | --python PATH` (one of them required) and `--device`; the group is returned so a
    command can add another way in (env_probe's `--show`)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--adapt", help="measure with this adaptation's synced environment")
    where.add_argument("--python", help="measure with this interpreter (must have torch)")
    parser.add_argument("--device", default="auto", choices=DEVICES)
    return where


def chosen_interpreter(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """(the interpreter, the folder to run it in: the adaptation's, else the checkout), None when the
    command was given neither; CliError (exit 2, one line) for an adaptation or interpreter that is not there."""
    try:
        if args.python:
            return adaptation_python(Path("."), args.python), REPO_ROOT
        if args.adapt:
            directory = resolve_adaptation(args.adapt, adaptations_dir())
            return adaptation_python(directory), directory
    except (EnvError, EvidenceError) as exc:
        raise CliError(str(exc)) from None
    return None
