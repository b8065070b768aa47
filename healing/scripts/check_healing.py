"""Gate for the healing stage: re-verify what the healer claims for one adaptation.

    uv run healing/scripts/check_healing.py --adapt NAME [--json] [--device DEVICE] [--timeout S]

The healer's evidence must belong to the current adaptation.json and device; the package checker
(adaptation/scripts/check_adaptation.py) runs in full as a separate process; a claimed real-weights
run is re-run and compared. Device and timeout default to the healing settings (ASCENDBRIDGE_DEVICE,
ASCENDBRIDGE_HEALING_DEMO_TIMEOUT_S). Exit 0 when everything holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ascendbridge.gatekit.checker import checker_main
from ascendbridge.gatekit.report import GateReport
from ascendbridge.settings import section
from healing.gate import check_adaptation
from healing.settings import HealingSettings


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", help="the device the evidence must be for (default: the healing settings')")
    parser.add_argument("--timeout", type=float, help="seconds for each run (default: the healing settings')")


def _check(args: argparse.Namespace, directory: Path) -> GateReport:
    settings = section(HealingSettings)
    if args.device:  # validated like the setting: an unknown device is one line, exit 2
        settings = HealingSettings.from_sources({"device": args.device})
    return check_adaptation(directory, settings.device, args.timeout or settings.demo_timeout_s)


def main(argv: list[str]) -> int:
    return checker_main(__doc__.splitlines()[0], argv, _check, extra=_options, python=False)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
