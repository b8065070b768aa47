"""Gate for the discovery stage: re-verify one model's discovery evidence against its board record.

    uv run discovery/scripts/check_discovery.py --adapt NAME [--json] [--board PATH] [--evidence FILE]

NAME is the model's adaptation name (its package need not exist yet). Reads the newest run's evidence
(logs/NAME/discovery/model_info-token*.json, or --evidence FILE), then re-resolves the model's files
from the board record, re-parses config.json, re-counts the parameters from the safetensors headers
(or asks the Hub), re-measures the weights and re-applies the decision rules, as the stage's gate does.
Exit 0 when everything holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ascendbridge.config import board_path
from ascendbridge.gatekit.checker import checker_main
from ascendbridge.gatekit.report import GateReport
from discovery.gate import check_model


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--board", type=Path, help="the board (default: $ASCENDBRIDGE_BOARD or <repo>/board.db)")
    parser.add_argument("--evidence", type=Path, help="a discovery evidence file (default: the newest run's)")


def _check(args: argparse.Namespace, directory: Path) -> GateReport:
    return check_model(directory.name, args.board or board_path(), args.evidence)


def main(argv: list[str]) -> int:
    return checker_main(__doc__.splitlines()[0], argv, _check, extra=_options, python=False, must_exist=False)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
