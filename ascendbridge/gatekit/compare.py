"""The one "recorded vs recomputed" comparison every gate uses.

A gate never trusts a recorded figure: it recomputes it from the raw evidence (samples,
predictions, saved tensors) and the two must agree. Figures pass through JSON and are summed in
another order by the recomputation, so floats agree to RECORDED_REL_TOL relative (RECORDED_ABS_TOL
absolute near zero); everything else (labels, tokens, verdicts, counts) must be equal. The
comparison itself lives in `ab_runtime/figures.py` (standard library only), so the adaptation's
interpreter (ascendbridge/gatekit/inner/) and the framework compare with the same code.
"""

from __future__ import annotations

from ab_runtime.figures import RECORDED_ABS_TOL, RECORDED_REL_TOL, recorded_differences, recorded_matches

__all__ = ["RECORDED_ABS_TOL", "RECORDED_REL_TOL", "recorded_differences", "recorded_matches"]
