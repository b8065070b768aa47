"""`board_ops.py discover` (also `scripts/discover_models.py`): find a batch of models on the
Hub, select them, and register the kept ones (`--register`; without it a dry run).

Exit codes: 0 done (whatever was kept), 2 bad input or the Hub cannot be reached (one line),
1 the board could not be written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ascendbridge.board import BoardStore
from ascendbridge.cli.output import Output
from ascendbridge.cli_errors import EXIT_OK, EXIT_USAGE, CliError
from ascendbridge.discovery.batch import BatchResult, find_batch, registrations
from ascendbridge.discovery.batch_model import MAX_LIMIT, SORT_KEYS, BatchPolicy, BatchQuery
from ascendbridge.discovery.batch_select import short_count
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.hub import hub_token

# Column widths that add up to 100 terminal columns with the six one-space gaps.
TABLE_WIDTHS = {"#": 3, "model": 26, "task": 15, "params": 6, "licence": 12, "downloads": 9, "why": 23}
COUNT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)
SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def parameter_count(text: str) -> int:
    """argparse type for --max-params: 7B, 500M, 1.5e9 or a plain number."""
    match = COUNT_RE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a parameter count (e.g. 7B, 500M, 1.5e9)")
    return int(float(match.group(1)) * SCALE[match.group(2).lower()])


def add_arguments(p: argparse.ArgumentParser) -> None:
    q = p.add_argument_group("query (HfApi.list_models; offline: matched against the cache or list)")
    q.add_argument("--task", help="pipeline tag, e.g. text-generation, feature-extraction")
    q.add_argument("--library", help="e.g. transformers, sentence-transformers")
    q.add_argument("--author", help="organisation or user")
    q.add_argument("--search", help="text the model id contains")
    q.add_argument("--language", help="language tag, e.g. en")
    q.add_argument("--sort", help=f"rank by {' | '.join(SORT_KEYS)} (default: downloads)")
    q.add_argument("--limit", type=int, help=f"how many models to look at, 1..{MAX_LIMIT} (default: 50 from the Hub)")
    s = p.add_argument_group("selection")
    s.add_argument(
        "--license",
        action="append",
        default=[],
        metavar="ID[,ID...]",
        help="licence allow-list (repeatable), e.g. apache-2.0,mit; default: any licence",
    )
    s.add_argument(
        "--allow-remote-code",
        action="store_true",
        help="keep models that ship code (registered with remote code allowed)",
    )
    s.add_argument("--no-gated", dest="exclude_gated", action="store_true", help="drop gated repos even with HF_TOKEN")
    s.add_argument("--max-params", type=parameter_count, metavar="N", help="drop models above N parameters (7B, 500M)")
    s.add_argument(
        "--memory-gb",
        type=float,
        metavar="GIB",
        help="device memory for the too-large rule (default: ASCENDBRIDGE_DEVICE_MEMORY_GB or 64)",
    )
    o = p.add_argument_group("source and result")
    o.add_argument(
        "--from",
        dest="id_list",
        metavar="FILE",
        help="only these models: a text file (one id per line) or a JSON array of ids",
    )
    o.add_argument(
        "--cache",
        nargs="?",
        const="",
        metavar="DIR",
        help="offline: read the local HF cache (default HF_HUB_CACHE) instead of the Hub",
    )
    o.add_argument("--register", action="store_true", help="register the kept models (default: dry run)")


def _query_and_policy(args: argparse.Namespace) -> tuple[BatchQuery, BatchPolicy]:
    try:
        query = BatchQuery.model_validate(args, from_attributes=True)  # the flags are named like its fields
    except ValidationError as exc:
        raise CliError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    if args.memory_gb is not None and not args.memory_gb > 0:
        raise CliError(f"--memory-gb {args.memory_gb:g} must be a positive number of GiB")
    licenses = sorted({x.strip().casefold() for arg in args.license for x in arg.split(",") if x.strip()})
    policy = BatchPolicy(
        licenses=licenses,
        allow_remote_code=args.allow_remote_code,
        exclude_gated=args.exclude_gated,
        has_token=bool(hub_token()),
        max_params=args.max_params,
        memory_gb=args.memory_gb,
    )
    return query, policy


def _register(args: argparse.Namespace, result: BatchResult) -> dict[str, Any]:
    """Register the kept models, or (dry run) say which ones the board does not have yet."""
    regs = registrations(result)
    if args.register:
        with BoardStore(Path(args.board)) as store:
            done = store.register_models(regs, origin="discover")
        new = [r.model_id for r, created in done if created]
        return {"dry_run": False, "registered": new, "already_registered": [r.model_id for r, c in done if not c]}
    on_board: set[str] = set()
    if Path(args.board).is_file():
        with BoardStore(Path(args.board)) as store:
            on_board = {m.model_id for m in store.list_models()}
    return {
        "dry_run": True,
        "would_register": [r.model_id for r in regs if r.model_id not in on_board],
        "already_registered": [r.model_id for r in regs if r.model_id in on_board],
        "priorities": {r.model_id: r.priority for r in regs},
    }


def _verdict(kept: bool, why: str) -> str:
    return "kept" if kept else f"dropped: {why}"


def _print(out: Output, result: BatchResult, board: dict[str, Any]) -> None:
    out.table(
        f"candidates ({result.source})",
        tuple(TABLE_WIDTHS),
        (
            (
                c.rank,
                c.model_id,
                c.task,
                short_count(c.info.parameter_count),
                c.info.license,
                short_count(c.downloads) if c.downloads is not None else "",
                _verdict(c.kept, c.why),
            )
            for c in result.candidates
        ),
        widths=TABLE_WIDTHS,
    )
    kept = len(result.kept)
    out.line(f"{kept} kept, {len(result.candidates) - kept} dropped")
    if board["dry_run"]:
        out.line(
            f"dry run: would register {len(board['would_register'])} "
            f"({len(board['already_registered'])} already on the board); add --register to register them"
        )
    else:
        out.line(f"registered {len(board['registered'])}, {len(board['already_registered'])} already on the board")


def cmd_discover(args: argparse.Namespace, out: Output) -> int:
    query, policy = _query_and_policy(args)
    try:
        result = find_batch(query, policy, Path(args.id_list) if args.id_list else None, args.cache)
    except DiscoveryError as exc:  # the Hub unreachable included: one line, exit 2
        raise CliError(str(exc), EXIT_USAGE) from None
    board = _register(args, result)
    if out.json_mode:
        out.json(
            {
                "source": result.source,
                "query": query.model_dump(),
                "kept": [c.model_id for c in result.kept],
                "candidates": [c.row() for c in result.candidates],
                "board": board,
            }
        )
    else:
        _print(out, result, board)
    return EXIT_OK
