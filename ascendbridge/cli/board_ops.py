"""`scripts/board_ops.py`: inspect and steer the board from a shell.

Global options (`--board`, `--json`) are accepted before or after the subcommand. Argument
errors are one `error:` line and exit 2, like every other bad input (see errors.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence

from ascendbridge import config
from ascendbridge.board.store import SOURCES
from ascendbridge.cli import board_commands as cmds
from ascendbridge.cli import discover_command
from ascendbridge.cli.output import Output
from ascendbridge.cli_errors import OneLineParser, run_guarded
from ascendbridge.stages import STAGES, STATUSES

Handler = Callable[[argparse.Namespace, Output], int]
# Adds one subcommand (name, handler, help) and returns its parser for the command's own arguments.
Add = Callable[[str, Handler, str], argparse.ArgumentParser]


def ascii_int(raw: str) -> int:
    """An integer in ASCII digits only: int() also takes full-width and Arabic-Indic digits
    ('１２' -> 12), which a person reading the board or a script would not recognise."""
    if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
        raise argparse.ArgumentTypeError(f"invalid int value: '{raw}' (a whole number in ASCII digits)")
    return int(raw)


def _global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--board", metavar="PATH", default=default, help="board file (default: $ASCENDBRIDGE_BOARD or <repo>/board.db)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="machine-readable JSON instead of tables",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="every table column at full width (default: fit the terminal, 100 columns when not a terminal)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="board_ops.py", description="Inspect and steer the AscendBridge board.")
    _global_options(parser, suppress=False)
    common = OneLineParser(add_help=False)
    _global_options(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    handlers: dict[str, Handler] = {}

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        handlers[name] = handler
        return sub.add_parser(name, parents=[common], help=help_text, description=help_text)

    add("init", cmds.cmd_init, "create the board (or upgrade an existing one in place)")

    _registration_commands(add)
    _reading_commands(add)
    _steering_commands(add)
    _agent_and_export_commands(add)

    parser.set_defaults(handlers=handlers)
    return parser


def _registration_commands(add: Add) -> None:
    """Putting models on the board: one, a file of them, or what discovery finds."""
    p = add("register_model", cmds.cmd_register_model, "register one model (idempotent)")
    p.add_argument("--model_id", "--model-id", dest="model_id", required=True, help="e.g. org/name")
    p.add_argument("--source", choices=SOURCES, default="huggingface")
    p.add_argument("--url", help="http(s) address of the model page or repository")
    p.add_argument("--path", help="local model directory (source local) or HF cache directory")
    p.add_argument("--revision", help="branch, tag or commit")
    p.add_argument("--description", default="")
    p.add_argument("--priority", type=ascii_int, default=0, help="higher runs first (default 0)")
    p.add_argument(
        "--allow-remote-code",
        "--allow_remote_code",
        dest="allow_remote_code",
        action="store_true",
        help="allow trust_remote_code for this model",
    )
    p.add_argument(
        "--enable-stage",
        "--enable_stage",
        dest="enable_stages",
        action="append",
        default=[],
        metavar="STAGE",
        help="run this opt-in stage for the model (repeatable; e.g. quantization, docs/quantization.md)",
    )
    p.add_argument(
        "--depth",
        "--proxy-depth",
        dest="proxy_depth",
        type=ascii_int,
        metavar="N",
        help="a reduced-depth proxy: every stage builds the same architecture with N layers (per layer "
        "stack; 1 to the model's layer count), its figures labelled 'proxy: N of M layers' (docs/usage.md)",
    )
    p.add_argument(
        "--train-data",
        "--train_data",
        dest="train_data",
        metavar="PATH",
        help="a training job: the corpus (JSONL / JSON / CSV / text / Parquet), or a dataset "
        "hf:ORG/NAME[:SPLIT][@REVISION] the stage loads with `datasets`; the model then gets a "
        "training stage after healing (docs/training.md)",
    )
    p.add_argument(
        "--train-method",
        "--train_method",
        dest="train_method",
        choices=("full", "lora"),
        help="full fine-tuning or LoRA adapters (default full; needs --train-data)",
    )
    p.add_argument(
        "--train-steps",
        "--train_steps",
        dest="train_steps",
        type=ascii_int,
        metavar="N",
        help="global training steps (default 30; needs --train-data)",
    )
    p.add_argument(
        "--train-processes",
        "--train_processes",
        dest="train_processes",
        type=ascii_int,
        metavar="N",
        help="the job's world size: torchrun processes, each on a device the training stage claims "
        "from the team lead's pool (default 1; needs --train-data)",
    )

    p = add(
        "register_many",
        cmds.cmd_register_many,
        "register every model in a text (one id per line) or JSONL file; a bad line registers nothing",
    )
    p.add_argument("file", metavar="FILE")

    p = add(
        "discover",
        discover_command.cmd_discover,
        "find models on the Hub (or in the HF cache, or a list), select and de-duplicate them, "
        "register the kept ones with --register",
    )
    discover_command.add_arguments(p)


def _reading_commands(add: Add) -> None:
    """Reading the board: models, one stage's tasks, one model in full."""
    add("list_models", cmds.cmd_list_models, "list models with their current stage")
    for name, stage in cmds.LIST_TASK_COMMANDS.items():
        p = add(name, cmds.make_list_tasks(stage), f"list {stage} tasks")
        p.add_argument("--status", choices=STATUSES, help="only tasks with this status")

    p = add("show", cmds.cmd_show, "one model: fields, stages, attempts, recent events, open guidance")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--events", type=ascii_int, default=20, help="how many recent events (default 20)")


def _steering_commands(add: Add) -> None:
    """A person's steering: priority, retry, skip, rollback, pause, permissions, environment, guidance."""
    p = add("set_priority", cmds.cmd_set_priority, "set a model's priority (higher runs first)")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("priority", metavar="N", type=ascii_int)

    p = add("retry", cmds.cmd_retry, "return a failed/blocked/skipped stage to pending")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--stage", choices=STAGES, help="default: the first failed or blocked stage")

    p = add("skip", cmds.cmd_skip, "skip one stage of a model")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--stage", choices=STAGES, required=True)

    p = add("rollback", cmds.cmd_rollback, "re-run from STAGE: it becomes pending, later stages wait again")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--to", choices=STAGES, required=True, metavar="STAGE")

    for name, help_text in (("pause", "stop scheduling a model"), ("resume", "schedule a paused model again")):
        p = add(name, cmds.cmd_pause, help_text)
        p.add_argument("model", metavar="MODEL")

    p = add("allow_remote_code", cmds.cmd_allow_remote_code, "allow trust_remote_code for a model")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--revoke", action="store_true", help="forbid it again")

    p = add("set_depth", cmds.cmd_set_depth, "build a model as a reduced-depth proxy of N layers, or --full depth")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("depth", metavar="N", type=ascii_int, nargs="?", help="layers per layer stack (1 to the model's)")
    p.add_argument("--full", action="store_true", help="the full depth again")

    p = add("set_env", cmds.cmd_set_env, "environment mode of a model's runs: locked, system (--python) or default")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--env", required=True, choices=("locked", "system", "default"))
    p.add_argument("--python", help="the system interpreter with torch (/torch_npu) preinstalled (--env system)")

    p = add("guide", cmds.cmd_guide, "leave guidance for the team lead: guide MODEL TEXT | guide --all TEXT")
    p.add_argument("--all", action="store_true", help="guidance for every model")
    p.add_argument("words", nargs="+", metavar="MODEL|TEXT")


def _agent_and_export_commands(add: Add) -> None:
    """Agents' heartbeats and cleanup, the event stream, the whole board as JSON."""
    p = add("heartbeat", cmds.cmd_heartbeat, "register or refresh an agent")
    p.add_argument("--agent-id", "--agent_id", dest="agent_id", required=True)
    p.add_argument("--role", help="needed when the agent is new")
    p.add_argument("--pid", type=ascii_int, help="the agent's process id (default: the caller's)")
    p.add_argument("--task-id", dest="task_id", type=ascii_int, help="the task it is working on")

    add("list_agents", cmds.cmd_list_agents, "list agents and their last heartbeat")

    p = add(
        "cleanup", cmds.cmd_cleanup, "mark silent agents stale and return their (and any expired) leases to pending"
    )
    p.add_argument(
        "--stale-after",
        "--stale_after",
        dest="stale_after",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="silence after which an agent is stale (default 300)",
    )

    p = add("prune_envs", cmds.cmd_prune_envs, "remove stable environments no stage synced or reused for --days")
    p.add_argument("--days", type=float, default=14.0, help="unused for this many days (default 14)")
    p.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true", help="only list them")

    p = add("events", cmds.cmd_events, "recent events; --follow keeps printing new ones until Ctrl-C")
    p.add_argument("--model", help="only this model's events")
    p.add_argument("--follow", "-f", action="store_true")
    p.add_argument("--limit", type=ascii_int, default=50, help="how many recent events (default 50)")
    p.add_argument("--interval", type=float, default=1.0, help="poll interval for --follow (s)")

    p = add("export", cmds.cmd_export, "dump the whole board as JSON")
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.board is None:
        args.board = str(config.board_path())
    if args.command == "heartbeat" and args.pid is None:
        args.pid = os.getppid()  # the script or shell that reports the heartbeat
    handler: Handler = args.handlers[args.command]
    out = Output(json_mode=bool(args.json), wide=bool(args.wide))
    return run_guarded(lambda: handler(args, out))


def discover_main(argv: Sequence[str] | None = None) -> int:
    """scripts/discover_models.py: the same command as `board_ops.py discover`."""
    return main(["discover", *(sys.argv[1:] if argv is None else argv)])
