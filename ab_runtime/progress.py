"""Progress on long work: `step i/n, elapsed, rate` lines in the attempt log, and the attempt's
heartbeat (the last line and its time), so a person can tell a slow step from a hang.

    with Progress("baseline contract (reference)", total=4) as progress:
        for _ in range(4):
            trainer.step()
            progress.advance()

    with Progress("accuracy samples", total=len(samples), unit="sample") as progress:
        for inputs in progress.over(samples):
            ...

prints, to stderr (the attempt log holds a run's stdout and stderr, in order; stdout stays
for what programs read, like the RESULT line):

    progress: baseline contract (reference): step 0/4, started
    progress: baseline contract (reference): step 2/4, elapsed 14m02s, 7m01s/step
    progress: baseline contract (reference): step 4/4, elapsed 28m10s, 7m02s/step, done

Rate-limited: a phase prints its first line, at most one line every EVERY_S seconds as it advances,
and its last line. A phase started inside another (a block of calls inside the optimization
search's pass) prints only once it has run EVERY_S seconds, so a tiny model's log gains two lines
per outermost phase, a real model's a line every few seconds. Every printed line is also written,
with its time, to the heartbeat file the environment names (PROGRESS_FILE_ENV: the team lead's
executor sets it beside the attempt log), replaced atomically; the team lead's progress output and
the dashboard's model page read it with `read_heartbeat`. Only the first process of a
torchrun group (RANK 0) reports. Standard library only: the framework imports this file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TextIO, TypeVar

from .fileops import write_text_atomic

PROGRESS_FILE_ENV = "ASCENDBRIDGE_PROGRESS_FILE"
EVERY_S = 10.0  # at most one line per phase this often, its first and last aside
PREFIX = "progress: "
T = TypeVar("T")

_active: list[Progress] = []  # the phases running in this process, outermost first


def fmt_s(seconds: float | None, unknown: str = "?") -> str:
    """A duration in the largest units that matter (1h05m, 4m07s, 9s); `unknown` where there is none."""
    if seconds is None:
        return unknown
    whole = int(round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def rate(done: int, elapsed_s: float, unit: str) -> str:
    """`7m01s/step` for slow steps, `12.5 step/s` for fast ones; empty before the first step."""
    if done <= 0 or elapsed_s <= 0:
        return ""
    per = elapsed_s / done
    return f"{fmt_s(per)}/{unit}" if per >= 1.0 else f"{done / elapsed_s:.1f} {unit}/s"


@dataclass(frozen=True)
class Heartbeat:
    """The last progress line an attempt printed, when (epoch seconds) and by which process."""

    line: str
    at: float
    pid: int

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.at)

    def describe(self, now: float | None = None) -> str:
        """`accuracy (reference): sample 40/64, elapsed 3m10s, 4.8s/sample (12s ago)`."""
        return f"{self.line} ({fmt_s(self.age_s(now))} ago)"


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The heartbeat at `path`; None when there is none yet or it cannot be read (progress is for
    people, never a verdict)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Heartbeat(str(data["line"]), float(data["at"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _reporting() -> bool:
    return os.environ.get("RANK", "0") == "0"


def _beat(line: str) -> None:
    path = os.environ.get(PROGRESS_FILE_ENV)
    if not path:
        return
    record = {"line": line, "at": round(time.time(), 3), "pid": os.getpid()}
    try:  # not durable: a heartbeat lost in a crash says nothing the log does not
        write_text_atomic(Path(path), json.dumps(record) + "\n", durable=False)
    except OSError:
        pass  # a heartbeat that cannot be written must not stop the work it describes


class Progress:
    """One phase of long work: `total` units (None: not known ahead), each called `unit` (""
    for work that is waited on, not counted: its lines give the elapsed time and the note)."""

    def __init__(
        self,
        what: str,
        total: int | None = None,
        unit: str = "step",
        every_s: float = EVERY_S,
        out: TextIO | None = None,
    ) -> None:
        self.what, self.total, self.unit, self.every_s = what, total, unit, every_s
        self.out = out
        self.done = 0
        self.note = ""
        self._started = self._last = 0.0
        self._nested = False
        self._printed = False
        self._open = False

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.finish("done" if kind is None else f"stopped ({kind.__name__})")

    def start(self) -> Progress:
        self._started = self._last = time.monotonic()
        self._nested = bool(_active)
        self._open = True
        _active.append(self)
        if not self._nested:
            self._emit("started")
        return self

    def over(self, items: Iterable[T]) -> Iterator[T]:
        """`items`, one unit each (advanced as the next one is taken); the phase itself ends with
        its `with` block, so a loop left by an exception or a `break` ends it there and then."""
        for item in items:
            yield item
            self.advance()

    def due(self) -> bool:
        """Whether the next `advance` prints a line: EVERY_S has passed since the last one (a phase
        started inside another: since its start). A note that costs something is made only then."""
        return time.monotonic() - self._last >= self.every_s

    def advance(self, steps: int = 1, note: str = "") -> None:
        """`steps` more units done (0: only time went by, e.g. a server starting); a line when due."""
        self.done += steps
        self.note = note
        if self.due() and (self.total is None or self.done < self.total):
            self._emit()  # the last unit's line is finish()'s

    def finish(self, how: str = "done") -> None:
        """The last line (a nested phase's only if it printed before or ran EVERY_S)."""
        if not self._open:
            return
        self._open = False
        if self in _active:
            _active.remove(self)
        if not self._nested or self._printed or time.monotonic() - self._started >= self.every_s:
            self._emit(how)

    def text(self, how: str = "") -> str:
        """`WHAT: step i/n, elapsed E, R/step[, how][ (note)]`."""
        elapsed = time.monotonic() - self._started
        counted = bool(self.unit) and (self.total is not None or self.done > 0)
        parts = [f"{self.unit} {self.done}" + (f"/{self.total}" if self.total is not None else "")] if counted else []
        if how != "started":
            parts.append(f"elapsed {fmt_s(elapsed)}")
            parts.append(rate(self.done, elapsed, self.unit) if self.unit else "")
        parts.append(how)
        body = ", ".join(p for p in parts if p)
        return f"{self.what}: {body}" + (f" ({self.note})" if self.note else "")

    def _emit(self, how: str = "") -> None:
        self._last = time.monotonic()
        self._printed = True
        if not _reporting():
            return
        line = self.text(how)
        out = self.out or sys.stderr
        out.write(PREFIX + line + "\n")
        out.flush()
        _beat(line)
