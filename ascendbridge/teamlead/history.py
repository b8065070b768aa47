"""Stage durations from earlier boards on this host: the ETA's prior for a stage that has no
costed attempt on the current board yet (teamlead/eta.py).

One JSON file per user (ascendbridge.config.stage_history_path: the setting `paths.stage_history`,
default `$XDG_CACHE_HOME/ascendbridge/stage_history.json`). It keeps,
per board (its resolved path) and host name, the durations of the board's costed attempts per
stage and task family (the latest MAX_PER_KEY of each) and, in `params` beside them, each attempt's
model size (null where unknown; an entry written before sizes were kept has none: unknown sizes),
for the MAX_BOARDS boards updated last. The
team lead rewrites its own board's entry whenever an attempt has finished, for the product's own
stages only: a test's or a plugin's stand-in under a stage's name would teach the host wrong costs.
The file is a cache, never a source of truth: unreadable, malformed or of another version, it is
ignored with one warning and replaced by the next write. Writes are atomic (a temporary file renamed
over it); when two team leads write at once the last one wins, and the other's entry comes back with
its next write, since an entry always carries its board's whole list.
"""

from __future__ import annotations

import json
import math
import socket
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ab_runtime.fileops import write_text_atomic
from ascendbridge.teamlead.eta import Sample

VERSION = 1
MAX_BOARDS = 20
MAX_PER_KEY = 50


class HistoryError(ValueError):
    """The history file cannot be used (the message says why, in one line)."""


def _read(path: Path) -> dict[str, Any]:
    """The boards in the file ({} when there is none yet); HistoryError when it is unusable."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"stage history {path} unreadable: {exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise HistoryError(f"stage history {path} is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("boards"), dict):
        raise HistoryError(f"stage history {path} is not a version-{VERSION} history")
    for key, entry in data["boards"].items():
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("host"), str)
            and isinstance(entry.get("samples"), dict)
            and all(
                isinstance(per, dict)
                and all(isinstance(v, list) and all(_is_duration(x) for x in v) for v in per.values())
                for per in entry["samples"].values()
            )
        )
        if not ok:
            raise HistoryError(f"stage history {path}: malformed entry for board {key}")
    return dict(data["boards"])


def _sizes(entry: dict[str, Any], stage: str, family: str, count: int) -> list[int | None]:
    """The model sizes beside an entry's `count` durations of (stage, family); None where unknown
    (an entry written before sizes were kept, or one whose sizes do not line up)."""
    raw = entry.get("params", {})
    values = raw.get(stage, {}).get(family) if isinstance(raw, dict) and isinstance(raw.get(stage), dict) else None
    if not isinstance(values, list) or len(values) != count:
        return [None] * count
    return [v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None for v in values]


def _is_duration(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class HostHistory:
    """One board's view of the host's history: the priors from the other boards, its own entry."""

    def __init__(self, path: Path, board: Path, host: str | None = None) -> None:
        self.path = path
        self.board = str(board.resolve())
        self.host = host or socket.gethostname()

    def priors(self) -> list[Sample]:
        """Completed attempts on earlier boards of this host (never this board's own);
        HistoryError when the file is unusable."""
        out = []
        for key, entry in _read(self.path).items():
            if key == self.board or entry["host"] != self.host:
                continue
            for stage, per in entry["samples"].items():
                for family, values in per.items():
                    sizes = _sizes(entry, stage, family, len(values))
                    out += [Sample(stage, family or None, float(s), n) for s, n in zip(values, sizes)]
        return out

    def record(self, samples: Iterable[Sample]) -> None:
        """Replace this board's entry with `samples` (its costed attempts, oldest first). An
        unusable file is replaced; OSError when the file cannot be written."""
        try:
            boards = _read(self.path)
        except HistoryError:
            boards = {}
        per: dict[str, dict[str, list[float]]] = {}
        sizes: dict[str, dict[str, list[int | None]]] = {}
        for sample in samples:
            per.setdefault(sample.stage, {}).setdefault(sample.family or "", []).append(round(sample.duration_s, 3))
            sizes.setdefault(sample.stage, {}).setdefault(sample.family or "", []).append(sample.params)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        boards[self.board] = {
            "host": self.host,
            "updated": now,
            "samples": {st: {fam: v[-MAX_PER_KEY:] for fam, v in fams.items()} for st, fams in per.items()},
            "params": {st: {fam: v[-MAX_PER_KEY:] for fam, v in fams.items()} for st, fams in sizes.items()},
        }
        kept = sorted(boards.items(), key=lambda kv: str(kv[1].get("updated", "")), reverse=True)[:MAX_BOARDS]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps({"version": VERSION, "boards": dict(kept)}, indent=1, sort_keys=True))
