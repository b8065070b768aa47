"""`get_model_info.py MODEL`: what discovery learns about a model, for people and scripts.

Exit codes: 0 discovered (whatever the decision), 1 bad input (missing directory, corrupt
config.json or safetensors header, invalid id, not found), 2 usage error, 3 the Hub could not be
reached (retry later or set HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ascendbridge.cli_errors import OneLineParser
from ascendbridge.discovery.decisions import decide
from ascendbridge.discovery.discover import SOURCES, discover
from ascendbridge.discovery.errors import DiscoveryError, HubUnreachableError
from ascendbridge.discovery.hub import hub_token
from ascendbridge.discovery.render import render

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog="get_model_info.py",
        description=__doc__.splitlines()[0],
        epilog="Exit codes: 0 ok, 1 bad input, 2 usage, 3 Hub unreachable.",
    )
    p.add_argument("model", help="model id (org/name), or a directory with --source local")
    p.add_argument(
        "--source",
        choices=SOURCES,
        default=None,
        help="where to read the model (default: local when MODEL or --path is a directory, else huggingface)",
    )
    p.add_argument("--path", help="local: the model directory; hf-cache: the cache directory (default HF_HUB_CACHE)")
    p.add_argument("--revision", help="branch, tag or commit (huggingface / hf-cache)")
    p.add_argument("--allow-remote-code", action="store_true", help="decide as if the board allowed remote code")
    p.add_argument("--json", action="store_true", help="print the full ModelInfo (with its decision) as JSON")
    return p.parse_args(argv)


def resolve(args: argparse.Namespace) -> tuple[str, str, str | None]:
    """(model id, source, path): a directory given as MODEL is a local model named after it."""
    source, path, model_id = args.source, args.path, args.model
    if source is None:
        source = "local" if (path or Path(model_id).is_dir()) else "huggingface"
    if source == "local" and not path:
        path, model_id = model_id, Path(model_id).resolve().name
    return model_id, source, path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model_id, source, path = resolve(args)
    try:
        info = discover(model_id, source, path, args.revision)
        info.decision = decide(info, args.allow_remote_code, has_token=bool(hub_token()))
    except HubUnreachableError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_UNREACHABLE
    except DiscoveryError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(info.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        print(render(info))
    return EXIT_OK
