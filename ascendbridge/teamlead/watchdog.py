"""Keep a team lead running: restart it when it exits or when its board heartbeat goes stale.

The watchdog starts the team lead in a new process group and only ever signals that group
(never processes found by name). After a team lead ends, however it ended, the watchdog kills
every process still carrying an attempt marker of its board (workers lead their own groups, so a
group kill of the team lead does not reach them; see ascendbridge.workers.containment). Restarts back off exponentially (reset after a run that lasted
--healthy-after seconds). A usage error (exit 2) is not retried: it would fail the same way.

Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage error (its own or the team lead's),
6 gave up after --max-restarts restarts.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import board_path
from ascendbridge.workers.containment import kill_board_attempts

EXIT_STOPPED, EXIT_USAGE, EXIT_GAVE_UP = 0, 2, 6
TEAM_LEAD_USAGE_EXIT = 2
STOP_GRACE_S = 30.0  # a team lead releases its tasks on SIGTERM; give it time


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} watchdog: {message}", file=sys.stderr, flush=True)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def heartbeat_age(store: BoardStore | None, agent_id: str, since: float) -> float | None:
    """Seconds since the team lead's last heartbeat, counted from `since` (its start) at most."""
    if store is None:
        return None
    try:
        agent = next((a for a in store.list_agents() if a.id == agent_id), None)
    except BoardError:
        return None
    last = since
    if agent is not None:
        last = max(last, datetime.fromisoformat(agent.last_heartbeat).timestamp())
    return time.time() - last


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = OneLineParser(
        prog="team_lead_watchdog.sh",
        description=__doc__.splitlines()[0],
        epilog="Arguments after -- go to the team lead (it always runs with --forever).",
    )
    p.add_argument("--board", type=Path, help="board file (default: ASCENDBRIDGE_BOARD or ./board.db)")
    p.add_argument(
        "--stale-after",
        type=float,
        help="restart when the heartbeat is older than this many seconds ($WATCHDOG_STALE_S or 120)",
    )
    p.add_argument("--check-every", type=float, default=5.0, help="seconds between checks (default 5)")
    p.add_argument("--max-backoff", type=float, default=300.0, help="longest wait between restarts (default 300)")
    p.add_argument(
        "--healthy-after", type=float, default=600.0, help="a run this long resets the backoff (default 600)"
    )
    p.add_argument("--max-restarts", type=int, default=0, help="give up after this many restarts (0: never)")
    p.add_argument("--agent-id", default="team-lead", help="the team lead's agent id on the board")
    p.add_argument("--command", help="team-lead command (default: python -m ascendbridge.teamlead --forever)")
    raw = list(sys.argv[1:] if argv is None else argv)
    extra = raw[raw.index("--") + 1 :] if "--" in raw else []
    mine = raw[: raw.index("--")] if "--" in raw else raw
    args = p.parse_args(mine)
    if args.stale_after is None:
        try:
            args.stale_after = float(os.environ.get("WATCHDOG_STALE_S") or 120)
        except ValueError:
            p.error(f"WATCHDOG_STALE_S={os.environ['WATCHDOG_STALE_S']!r} is not a number")
    if min(args.stale_after, args.check_every, args.max_backoff) <= 0:
        p.error("durations must be positive")
    return args, extra


class Watchdog:
    def __init__(self, args: argparse.Namespace, extra: list[str]) -> None:
        self.args = args
        self.board = (args.board or board_path()).expanduser().resolve()
        base = args.command.split() if args.command else [sys.executable, "-m", "ascendbridge.teamlead", "--forever"]
        self.argv = [*base, "--board", str(self.board), "--agent-id", args.agent_id, *extra]
        self.stop = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None

    def _store(self) -> BoardStore | None:
        try:
            return BoardStore(self.board)
        except BoardError as exc:
            say(f"cannot read the board yet: {exc}")
            return None

    def _stop_child(self, why: str) -> None:
        child = self.child
        if child is None or child.poll() is not None:
            return
        say(f"stopping team lead pid {child.pid} ({why})")
        for sig in (signal.SIGCONT, signal.SIGTERM):  # a stopped (hung) group must be able to take SIGTERM
            _signal_group(child.pid, sig)
        try:
            child.wait(timeout=STOP_GRACE_S)  # reaping it here: a zombie leader would look alive
        except subprocess.TimeoutExpired:
            say(f"team lead pid {child.pid} ignored SIGTERM for {STOP_GRACE_S:.0f} s; killing its group")
        _signal_group(child.pid, signal.SIGKILL)  # whatever is left of the group
        child.wait()
        self._sweep()

    def _sweep(self) -> None:
        """No attempt of a dead team lead keeps running (or writing) until the next one starts."""
        killed = kill_board_attempts(self.board)
        if killed:
            say(f"killed {killed} process(es) left by the team lead's attempts")

    def _supervise(self, store: BoardStore | None) -> int | None:
        """Wait for the child to exit (its code) or go stale (None)."""
        assert self.child is not None
        started = time.time()
        while not self.stop.is_set():
            try:
                return self.child.wait(timeout=self.args.check_every)
            except subprocess.TimeoutExpired:
                pass
            age = heartbeat_age(store, self.args.agent_id, started)
            if age is not None and age > self.args.stale_after:
                self._stop_child(f"heartbeat {age:.0f} s old > {self.args.stale_after:g} s")
                return None
        return None

    def run(self) -> int:
        backoff, restarts = 1.0, 0
        store = self._store()
        try:
            while not self.stop.is_set():
                store = store or self._store()
                began = time.monotonic()
                self.child = subprocess.Popen(self.argv, start_new_session=True)
                say(f"team lead started, pid {self.child.pid}")
                code = self._supervise(store)
                if code is not None:  # it exited by itself (or was SIGKILLed): its workers may not have
                    self._sweep()
                if self.stop.is_set():
                    break
                if code == TEAM_LEAD_USAGE_EXIT:
                    say("team lead rejected its arguments (exit 2); not restarting")
                    return EXIT_USAGE
                if time.monotonic() - began >= self.args.healthy_after:
                    backoff = 1.0
                restarts += 1
                if self.args.max_restarts and restarts > self.args.max_restarts:
                    say(f"gave up after {self.args.max_restarts} restarts")
                    return EXIT_GAVE_UP
                reason = "went stale" if code is None else f"exited with code {code}"
                say(f"team lead {reason}; restart {restarts} in {backoff:.0f} s")
                self.stop.wait(backoff)
                backoff = min(backoff * 2, self.args.max_backoff)
        finally:
            self._stop_child("watchdog stopping")
            if store is not None:
                store.close()
        return EXIT_STOPPED


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    dog = Watchdog(args, extra)

    def on_signal(signum: int, _frame: object) -> None:
        say(f"{signal.Signals(signum).name} received")
        dog.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return dog.run()


if __name__ == "__main__":
    sys.exit(main())
