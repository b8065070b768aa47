"""Recorded vs recomputed figures: one comparison, one tolerance (standard library only).

Evidence records figures (latencies, metrics, speedups); a gate recomputes them from the raw
evidence and they must agree. Floats survive a JSON round trip exactly but a recomputation may sum
in another order, so they agree to RECORDED_REL_TOL relative, or RECORDED_ABS_TOL absolute near
zero (NaN equals NaN); anything else (labels, tokens, verdicts, counts, keys) must be equal. The
framework's gates import this file (ascendbridge/gatekit/compare.py) and the runtime's comparator
uses it inside adaptations: one definition of "the same figure".
"""

from __future__ import annotations

import math
from typing import Any

RECORDED_REL_TOL = 1e-6
RECORDED_ABS_TOL = 1e-9


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def recorded_differences(recorded: Any, recomputed: Any, path: str = "") -> list[str]:
    """Every place where the two differ, as `path: recorded X != recomputed Y` (empty: they agree)."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        return [
            d
            for key in sorted(set(recorded) | set(recomputed), key=str)
            for d in recorded_differences(
                recorded.get(key, _MISSING), recomputed.get(key, _MISSING), f"{path}.{key}" if path else str(key)
            )
        ]
    if (
        isinstance(recorded, (list, tuple))
        and isinstance(recomputed, (list, tuple))
        and len(recorded) == len(recomputed)
    ):
        return [
            d for i, (a, b) in enumerate(zip(recorded, recomputed)) for d in recorded_differences(a, b, f"{path}[{i}]")
        ]
    if (isinstance(recorded, float) or isinstance(recomputed, float)) and _number(recorded) and _number(recomputed):
        if math.isnan(recorded) or math.isnan(recomputed):
            same = math.isnan(recorded) and math.isnan(recomputed)
        else:
            same = math.isclose(recorded, recomputed, rel_tol=RECORDED_REL_TOL, abs_tol=RECORDED_ABS_TOL)
    else:
        same = recorded == recomputed and type(recorded) is not _Missing and type(recomputed) is not _Missing
    return [] if same else [f"{path or '(value)'}: recorded {_show(recorded)} != recomputed {_show(recomputed)}"]


def recorded_matches(recorded: Any, recomputed: Any) -> bool:
    """True when a recorded figure (or a nested structure of them) equals its recomputation."""
    return not recorded_differences(recorded, recomputed)


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, (str, _Missing)) else str(value)
