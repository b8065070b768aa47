#!/usr/bin/env python3
"""Generic long-task progress table kept in a JSON file (--file): phases, estimates, actuals.

  progress_table.py --file run.json add "build envs" --estimate 20m
  progress_table.py --file run.json doing "build envs" 9/24        # "9/24" or "40%" is a percent
  progress_table.py --file run.json doing "build envs" "locking torch"   # anything else is a note
  progress_table.py --file run.json done "build envs" [--actual 18m]     # default: measured
  progress_table.py --file run.json estimate 2h                          # overall estimate
  progress_table.py --file run.json show [--json]

Durations: 90s, 20m, 1h30m, 1.5h, or a bare number of seconds. Show prints every phase and the
totals: estimated, spent, remaining time and the expected finish.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ab_runtime.fileops import write_text_atomic
from ab_runtime.progress import fmt_s
from ascendbridge.cli_errors import OneLineParser

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


class ProgressError(Exception):
    pass


def parse_duration(text: str) -> float:
    raw = text.strip().lower().replace(" ", "")
    try:
        value = float(raw)
    except ValueError:
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise ProgressError(f"'{text}' is not a duration (e.g. 90s, 20m, 1h30m)") from None
        value = sum(float(n) * _UNITS[u] for n, u in parts)
    if value < 0:
        raise ProgressError(f"duration '{text}' is negative")
    return value


def parse_percent(text: str) -> float | None:
    """'9/24' -> 37.5, '40%' -> 40.0; None for anything else (then it is a note)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s*", text)
    if m:
        total = float(m.group(2))
        if total <= 0:
            raise ProgressError(f"'{text}': the total must be positive")
        return min(100.0, 100.0 * float(m.group(1)) / total)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", text)
    return min(100.0, float(m.group(1))) if m else None


def fmt(seconds: float | None) -> str:
    """A duration as the team lead's ETA writes it; "-" for a phase not timed."""
    return fmt_s(seconds, unknown="-")


@contextmanager
def state_file(path: Path, write: bool) -> Iterator[dict[str, Any]]:
    """Load (and on write, atomically save) the state under an exclusive lock."""
    if not path.parent.is_dir():
        raise ProgressError(f"directory {path.parent} does not exist")
    lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state: dict[str, Any] = {"phases": [], "estimate_s": None}
        if path.exists():
            try:
                state = json.loads(path.read_text() or "{}")
                state.setdefault("phases", [])
                state.setdefault("estimate_s", None)
            except ValueError:
                raise ProgressError(f"{path} is not a progress file (invalid JSON)") from None
        yield state
        if write:
            write_text_atomic(path, json.dumps(state, indent=1))
    finally:
        os.close(lock)


def find(state: dict[str, Any], name: str) -> dict[str, Any]:
    for phase in state["phases"]:
        if phase["name"] == name:
            return phase
    known = ", ".join(p["name"] for p in state["phases"]) or "none yet"
    raise ProgressError(f"no phase '{name}' (phases: {known})")


def remaining(phase: dict[str, Any], now: float) -> float:
    est = phase.get("estimate_s") or 0.0
    if phase["status"] == "done":
        return 0.0
    if phase["status"] == "todo":
        return est
    elapsed = now - phase["started"]
    pct = (phase.get("percent") or 0.0) / 100.0
    if pct <= 0:
        return max(0.0, est - elapsed)
    if elapsed >= 0.1 * est:  # enough of the phase seen: extrapolate its measured pace
        return elapsed * (1 - pct) / pct
    return est * (1 - pct)


def totals(state: dict[str, Any], now: float) -> dict[str, Any]:
    phases = state["phases"]
    spent = sum(
        p["actual_s"] if p["status"] == "done" else (now - p["started"] if p["status"] == "doing" else 0)
        for p in phases
    )
    left = sum(remaining(p, now) for p in phases)
    estimate = state.get("estimate_s") or sum(p.get("estimate_s") or 0 for p in phases)
    done = sum(1 for p in phases if p["status"] == "done")
    return {
        "phases": len(phases),
        "done": done,
        "estimate_s": estimate,
        "spent_s": spent,
        "remaining_s": left,
        "expected_finish": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now + left)),
    }


def show(state: dict[str, Any], as_json: bool) -> None:
    now = time.time()
    tot = totals(state, now)
    if as_json:
        print(json.dumps({"phases": state["phases"], "totals": tot}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="progress")
    for col in ("phase", "status", "estimate", "actual / elapsed", "progress"):
        table.add_column(col)
    for p in state["phases"]:
        took = p.get("actual_s") if p["status"] == "done" else (now - p["started"] if p["status"] == "doing" else None)
        progress = " ".join(
            x for x in (f"{p['percent']:.0f}%" if p.get("percent") is not None else "", p.get("note") or "") if x
        )
        table.add_row(p["name"], p["status"], fmt(p.get("estimate_s")), fmt(took), progress)
    console = Console(width=None if sys.stdout.isatty() else 110)
    console.print(table)
    console.print(
        f"{tot['done']}/{tot['phases']} phases done; estimated {fmt(tot['estimate_s'])}, "
        f"spent {fmt(tot['spent_s'])}, remaining {fmt(tot['remaining_s'])}, "
        f"expected finish {tot['expected_finish']}"
    )


def apply(args: argparse.Namespace) -> None:
    path = Path(args.file).expanduser()
    with state_file(path, write=args.cmd != "show") as state:
        now = time.time()
        if args.cmd == "show":
            show(state, args.json)
            return
        if args.cmd == "estimate":
            state["estimate_s"] = parse_duration(args.duration)
            return
        if args.cmd == "add":
            if any(p["name"] == args.name for p in state["phases"]):
                raise ProgressError(f"phase '{args.name}' already exists")
            state["phases"].append(
                {
                    "name": args.name,
                    "status": "todo",
                    "estimate_s": parse_duration(args.estimate),
                    "note": args.note,
                    "percent": None,
                    "started": None,
                    "actual_s": None,
                }
            )
            return
        phase = find(state, args.name)
        if args.cmd == "doing":
            if phase["status"] == "todo":
                phase["started"] = now
            elif phase["status"] == "done":
                raise ProgressError(f"phase '{args.name}' is already done")
            phase["status"] = "doing"
            for item in filter(None, (args.progress, args.note)):
                pct = parse_percent(item)
                if pct is not None:
                    phase["percent"] = pct
                else:
                    phase["note"] = item
            return
        if args.cmd == "done":
            started = phase["started"] or now
            phase["actual_s"] = parse_duration(args.actual) if args.actual else now - started
            phase["status"] = "done"
            phase["percent"] = 100.0


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="progress_table.py", description=__doc__.splitlines()[0])
    p.add_argument("--file", required=True, help="JSON state file")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add", help="add a phase with an estimate")
    a.add_argument("name")
    a.add_argument("--estimate", required=True)
    a.add_argument("--note")
    d = sub.add_parser("doing", help="mark a phase as in progress, with a note or a percent")
    d.add_argument("name")
    d.add_argument("progress", nargs="?", help="'9/24', '40%%' or a note")
    d.add_argument("--note")
    f = sub.add_parser("done", help="mark a phase done (actual time measured unless --actual)")
    f.add_argument("name")
    f.add_argument("--actual")
    e = sub.add_parser("estimate", help="set the overall estimate")
    e.add_argument("duration")
    s = sub.add_parser("show", help="print the table with totals")
    s.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        apply(args)
    except ProgressError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
