"""Start the dashboard: `python -m dashboard` (or scripts/dashboard.py).

Binds 127.0.0.1 unless told otherwise. The action token comes from ASCENDBRIDGE_DASHBOARD_TOKEN,
or is generated here and printed once: without it nobody can change the board from a browser.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from pathlib import Path

from ascendbridge import config
from ascendbridge.board import BoardError
from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from dashboard.security import HOSTS_ENV, TOKEN_ENV, allowed_hosts, check_token_strength, new_token

DEFAULT_PORT = 8765


def _port(raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{raw}' is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 1-65535")
    return port


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="dashboard", description="Serve the AscendBridge board in a browser.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--board", type=Path, default=None, help="board.db (default: $ASCENDBRIDGE_BOARD or ./board.db)"
    )
    parser.add_argument("--logs", type=Path, default=None, help="logs directory (default: $ASCENDBRIDGE_LOGS)")
    parser.add_argument(
        "--adaptations", type=Path, default=None, help="adaptations directory (default: $ASCENDBRIDGE_ADAPTATIONS)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this Host name (repeatable; also "
        f"${HOSTS_ENV}, comma-separated); loopback names and --host always",
    )
    parser.add_argument(
        "--heartbeat-fresh",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="an agent heartbeat older than this is shown as late (default 60)",
    )
    return parser.parse_args(argv)


def _check_bindable(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise BoardError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main(argv: list[str] | None = None) -> int:
    """Exit 0 after serving, 1 when the board cannot be used, 2 on bad input (one `error:` line)."""
    return run_guarded(lambda: _serve(argv))


def _serve(argv: list[str] | None) -> int:
    args = parse_args(argv)
    try:
        import uvicorn

        from dashboard.app import create_app

        token = os.environ.get(TOKEN_ENV) or new_token()
        check_token_strength(token)
        board = (args.board or config.board_path()).expanduser().resolve()
        logs = (args.logs or config.logs_dir()).expanduser().resolve()
        adaptations = (args.adaptations or config.adaptations_dir()).expanduser().resolve()
        _check_bindable(args.host, args.port)
        app = create_app(
            board,
            token,
            logs,
            adaptations,
            heartbeat_fresh_s=args.heartbeat_fresh,
            hosts=allowed_hosts(args.host, args.allow_host),
        )
    except (BoardError, ValueError) as exc:
        raise CliError(str(exc)) from None
    url_host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"dashboard: http://{url_host}:{args.port}/  (board {board})", flush=True)
    if TOKEN_ENV in os.environ:
        print(f"action token: from ${TOKEN_ENV}", flush=True)
    else:
        print(f"action token: {token}  (set ${TOKEN_ENV} to choose your own)", flush=True)
    if app.state.dashboard.store.read_only:
        print(f"note: board {board} is not writable: pages work, actions answer 409", flush=True)
    if not _is_loopback(args.host):
        print(
            f"warning: listening on {args.host}, reachable from other machines; actions still need the token",
            file=sys.stderr,
            flush=True,
        )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
