"""`python -m healing`: the healer by hand, without the team lead.

    rules [--json]                                 list the rule catalogue
    classify LOG [--phase P] [--json]              classify a captured demo/uv output
    heal --adapt NAME [--device D] [--max-attempts N] [--allow-remote-code] [--no-real-weights] [--json]
    gate --adapt NAME [--device D] [--json]        the independent healing gate

Exit codes: 0 done / passed, 1 failed, 2 bad input, 3 blocked.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import adaptations_dir
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.uv_env import parse_result
from healing.agent_escalation import install as install_agent_escalators
from healing.classifier import classify
from healing.context import fix_context
from healing.failure import Failure
from healing.gate import check_adaptation
from healing.loop import heal
from healing.redact import redact
from healing.rules import RULES
from healing.settings import HealingSettings

EXIT = {"done": 0, "failed": 1, "blocked": 3}
PHASES = ("render", "lock", "sync", "dry_run", "real_run")


class BadInput(Exception):
    pass


def _directory(name: str, root: Path | None) -> Path:
    base = (root or adaptations_dir()).resolve()
    if not name or "/" in name or "\\" in name or name.startswith(".") or name != name.strip():
        raise BadInput(f"'{name}' is not an adaptation name")
    directory = base / name
    if not (directory / "adaptation.json").is_file():
        raise BadInput(f"no adaptation '{name}' under {base} (missing adaptation.json)")
    return directory


def cmd_rules(args: argparse.Namespace) -> int:
    rows = [{"name": r.name, "description": r.description} for r in RULES]
    if args.json:
        print(json.dumps(rows))
    else:
        for row in rows:
            print(f"{row['name']:<26} {row['description']}")
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    try:
        text = Path(args.log).read_text(errors="replace")
    except OSError as exc:
        raise BadInput(f"cannot read {args.log}: {exc.strerror}") from None
    output = redact(text)
    failure = Failure(phase=args.phase, exit_code=None, timed_out=False, output=output, result=parse_result(output))
    diagnosis = classify(failure).diagnosis()
    if args.json:
        print(json.dumps(diagnosis))
    else:
        print(f"{diagnosis['rule']}: {diagnosis['summary']}")
    return 0


def _settings(args: argparse.Namespace) -> HealingSettings:
    overrides: dict[str, Any] = {"device": args.device}
    if getattr(args, "max_attempts", None) is not None:
        overrides["healing_max_attempts"] = args.max_attempts
    if getattr(args, "no_real_weights", False):
        overrides["healing_real_weights"] = "0"
    try:
        return HealingSettings.from_sources(overrides)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def cmd_heal(args: argparse.Namespace) -> int:
    install_agent_escalators()  # same escalation path as the stage (the builtin backend answers nothing)
    directory = _directory(args.adapt, args.adaptations_dir)
    settings = _settings(args)
    try:
        spec = AdaptationSpec.load(directory)
    except ValueError as exc:
        raise BadInput(f"adaptation.json of '{args.adapt}' is not a valid spec: {str(exc).splitlines()[0]}") from None
    ctx = fix_context(spec, args.allow_remote_code)
    progress = sys.stderr if args.json else sys.stdout
    report = heal(
        directory,
        settings,
        ctx,
        lambda line: print(line, file=progress, flush=True),
        log=sys.stderr if args.verbose else None,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "status": report.status,
                    "summary": report.summary,
                    "fixes": report.fixes,
                    "diagnosis": report.diagnosis,
                    "attempts": [a.as_dict() for a in report.attempts],
                }
            )
        )
    else:
        print(f"{report.status}: {report.summary}")
    return EXIT[report.status]


def cmd_gate(args: argparse.Namespace) -> int:
    directory = _directory(args.adapt, args.adaptations_dir)
    settings = _settings(args)
    report = check_adaptation(directory, settings.device, settings.demo_timeout_s)  # as the checker script
    print(json.dumps(report.as_dict()) if args.json else report.text())
    return report.exit_code()


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m healing", description="The AscendBridge healer.")
    sub = p.add_subparsers(dest="command", required=True)
    rules = sub.add_parser("rules", help="list the rule catalogue")
    rules.add_argument("--json", action="store_true")
    rules.set_defaults(func=cmd_rules)
    cls = sub.add_parser("classify", help="classify a captured failure output")
    cls.add_argument("log", help="file with the demo.py / uv output (traceback and RESULT line)")
    cls.add_argument("--phase", choices=PHASES, default="dry_run")
    cls.add_argument("--json", action="store_true")
    cls.set_defaults(func=cmd_classify)
    for name, func, text in (("heal", cmd_heal, "heal an adaptation"), ("gate", cmd_gate, "run the healing gate")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--adapt", required=True, metavar="NAME")
        cmd.add_argument("--adaptations-dir", type=Path, default=None)
        cmd.add_argument("--device", choices=("cpu", "cuda", "npu"), default="cpu")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=func)
        if name == "heal":
            cmd.add_argument("--max-attempts", type=int, default=None)
            cmd.add_argument(
                "--allow-remote-code", action="store_true", help="let the remote_code rule turn on trust_remote_code"
            )
            cmd.add_argument("--no-real-weights", action="store_true", help="dry runs only")
            cmd.add_argument("--verbose", action="store_true", help="stream uv and demo output to stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit codes of ascendbridge/cli_errors.py: 2 for bad input (one `error:` line)."""
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BadInput as exc:
        raise CliError(str(exc)) from None
