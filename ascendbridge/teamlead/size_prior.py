"""How a stage's cost grows with the model's size: the size term of the ETA's prior (teamlead/eta.py).

The shipped cost model (stage_costs.json) was measured on tiny models (about 0.1 M parameters, and
the 22.7 M MiniLM): at that size an attempt is process starts, uv, gates and file work, which do not
grow with the model. What does grow is the model's own work (building it, forward and backward
passes, exports), about linearly in its parameters at a fixed sequence length. So one attempt of
stage s for a model of family f with P parameters costs, in the cost model's seconds,

    base(s, f) + c_s * (P / 1e9) ** k_s - c_s * (P_f / 1e9) ** k_s   (never below base(s, f))

where base(s, f) is the cost model's figure, P_f the median size of the models it was measured on
(stage_costs.json `size.params`: the term they already paid is not counted twice), c_s the seconds
a billion parameters add and k_s
the exponent. The ETA multiplies the whole by how fast the stage runs here, as before.

c_s and k_s come from, best first (SizeTerm.source):

- FITTED: the host's attempts of the stage at two or more sizes at least MIN_SPREAD apart, each of a
  model large enough that the default says its size dominates (it adds at least the overhead: at
  tiny sizes a slow attempt is noise, not size): a least-squares line through log(excess seconds)
  against log(parameters), k clamped to EXPONENT_RANGE; the excess is what the attempt took over its
  overhead at this host's speed (read from its attempts of overhead-only size), at least
  FLOOR_SHARE of the overhead;
- ONE_SIZE: attempts at one size only: the default exponent, c_s from their excess seconds;
- DEFAULT: no such attempt: the stage's `size_s_per_b` (its stage.toml: rough figures, each says
  what it rests on) with DEFAULT_EXPONENT; a stage whose rate is 0 (FLAT) does not scale
  (discovery reads headers only).

A model whose size is not known yet (before discovery, or weights that discovery could not count)
gets no size term: its figure is a tiny model's, and the ETA line says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ascendbridge.discovery.batch_select import short_count

BILLION = 1e9
DEFAULT_EXPONENT = 1.0  # compute-bound work: linear in parameters at a fixed sequence length
EXPONENT_RANGE = (0.3, 2.0)  # a fit outside it is noise, not a law
MIN_SPREAD = 2.0  # the largest fitted size at least this many times the smallest
DOMINATES = 1.0  # an attempt informs the fit when the default size term is at least this many overheads
FLOOR_SHARE = 0.05  # an excess never below this share of the overhead (a log needs it positive)
SMALL_SHARE = 0.1  # a default size term under this share of the overhead: an overhead-only attempt
MATTERS_S = 1.0  # a model whose size adds less than this (cost-model seconds) is not named as scaled

# SizeTerm.source
FITTED, ONE_SIZE, DEFAULT, FLAT = "fitted", "one size", "default", "flat"


class SizedPoint(NamedTuple):
    """One costed attempt of a model of known size: what a fit learns from."""

    params: int
    duration_s: float
    base_s: float  # the cost model's figure for its stage and family
    reference: int | None  # the size that figure was measured at (CostModel.reference_params)


@dataclass(frozen=True)
class SizeTerm:
    """The seconds a stage's attempt adds with the model's parameters (cost-model seconds)."""

    seconds_at_1b: float  # c_s: what a billion parameters add (0: the stage does not scale)
    exponent: float = DEFAULT_EXPONENT  # k_s
    source: str = DEFAULT
    sizes: int = 0  # distinct model sizes on this host's boards it rests on

    def seconds(self, params: int | None) -> float:
        if not params or self.seconds_at_1b <= 0:
            return 0.0
        return self.seconds_at_1b * (params / BILLION) ** self.exponent

    def extra(self, params: int | None, reference: int | None) -> float:
        """What `params` add over the size the cost model measured (0 for a size not known)."""
        if not params:
            return 0.0
        return max(0.0, self.seconds(params) - self.seconds(reference))

    def text(self) -> str:
        """What the term rests on: 'fitted here: 3 sizes, exponent 0.83' and the like."""
        if self.source == FITTED:
            return f"fitted here: {self.sizes} sizes, exponent {self.exponent:.2f}"
        if self.source == ONE_SIZE:
            return f"fitted here at 1 size, default exponent {self.exponent:g}"
        return f"default exponent {self.exponent:g}, no real-size attempt here"


def fit(points: Sequence[SizedPoint], default: SizeTerm) -> SizeTerm:
    """The size term `points` (one stage's attempts of known size, this host's) support; `default`
    when none of them is large enough for its size to show."""
    small = [p.duration_s / p.base_s for p in points if default.extra(p.params, p.reference) < SMALL_SHARE * p.base_s]
    speed = math.exp(statistics.median(math.log(r) for r in small if r > 0)) if any(r > 0 for r in small) else 1.0
    big = [
        (p.params, max(p.duration_s / speed - p.base_s, FLOOR_SHARE * p.base_s))
        for p in points
        if default.extra(p.params, p.reference) >= DOMINATES * p.base_s
    ]
    if not big:
        return default
    sizes = sorted({params for params, _ in big})
    xs = [math.log(params / BILLION) for params, _ in big]
    ys = [math.log(excess) for _, excess in big]
    if len(sizes) >= 2 and sizes[-1] >= MIN_SPREAD * sizes[0]:
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        k = min(max(slope, EXPONENT_RANGE[0]), EXPONENT_RANGE[1])
        return SizeTerm(math.exp(statistics.fmean(y - k * x for x, y in zip(xs, ys))), k, FITTED, len(sizes))
    k = default.exponent
    return SizeTerm(math.exp(statistics.median(y - k * x for x, y in zip(xs, ys))), k, ONE_SIZE, len(sizes))


def scaled_text(term: SizeTerm, known: Sequence[int], unknown: int) -> str:
    """The size part of a stage's basis: 'scaled to 596.0M params (default exponent 1, ...)';
    models of unknown size are named, since their figure is a tiny model's; '' when nothing scaled."""
    if term.seconds_at_1b <= 0:
        return ""
    parts = []
    if known:
        lo, hi = min(known), max(known)
        size = short_count(lo) if lo == hi else f"{short_count(lo)}-{short_count(hi)}"
        parts.append(f"scaled to {size} params ({term.text()})")
    if unknown:
        parts.append(f"{unknown} of unknown size, unscaled")
    return "; ".join(parts)
