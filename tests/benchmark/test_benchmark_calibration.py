"""The load-proof judgement of a re-timed figure (ab_runtime/calibration.py), on chosen numbers."""

from __future__ import annotations

from ab_runtime.calibration import HARD_BAND, Round, judge

BAND = 1.5


def test_a_re_timing_within_the_band_passes_on_the_fastest_call_or_on_the_ratio() -> None:
    # Idle: the fastest call reproduces.
    assert judge("forward call", 10.0, 1.0, [Round(11.0, 1.1)], BAND).verdict == "passed"
    # Loaded x3: the fastest call does not reproduce, the model/probe ratio does.
    judged = judge("forward call", 10.0, 1.0, [Round(30.0, 3.2, 40)], BAND)
    assert judged.verdict == "passed" and "model/probe ratio" in judged.reason
    assert judged.figures["relative"] < 1.0 and judged.figures["absolute"] == 3.0


def test_a_forged_figure_fails_beyond_the_hard_bound_whatever_the_spread() -> None:
    noisy = [Round(100.0, 1.0, 50), Round(300.0, 1.0, 80), Round(150.0, 1.0, 60)]  # x10 at best, spread x3
    judged = judge("forward call", 10.0, 1.0, noisy, BAND)
    assert judged.verdict == "failed" and f"hard bound x{HARD_BAND:g}" in judged.reason
    assert "does not reproduce" in judged.reason
    # Model and probe forged together (the ratio kept): the probe itself does not reproduce here.
    judged = judge("forward call", 1.0, 0.1, [Round(10.0, 1.0, 50)] * 3, BAND)
    assert judged.verdict == "failed" and "calibration does not reproduce" in judged.reason


def test_between_band_and_hard_bound_only_a_quiet_steady_host_fails() -> None:
    steady_quiet = [Round(25.0, 1.0, 0), Round(26.0, 1.0, 1), Round(25.5, 1.0, 0)]  # x2.5 every round
    assert judge("forward call", 10.0, 1.0, steady_quiet, BAND).verdict == "failed"
    preempted = [Round(25.0, 1.0, 30), Round(26.0, 1.0, 40), Round(25.5, 1.0, 35)]
    judged = judge("forward call", 10.0, 1.0, preempted, BAND)
    assert judged.verdict == "inconclusive" and "involuntary context switches" in judged.reason
    contended = [Round(37.5, 1.5, 0), Round(38.0, 1.5, 1), Round(37.0, 1.5, 0)]  # the probe itself x1.5 slower
    judged = judge("forward call", 10.0, 1.0, contended, BAND)
    assert judged.verdict == "inconclusive" and "ran the probe x1.50 slower" in judged.reason
    spread = [Round(25.0, 1.0, 0), Round(60.0, 1.0, 0), Round(40.0, 1.0, 0)]
    judged = judge("forward call", 10.0, 1.0, spread, BAND)
    assert judged.verdict == "inconclusive" and "rounds spread x2.40" in judged.reason
    # An interim look (more rounds to come) never fails.
    assert judge("forward call", 10.0, 1.0, steady_quiet[:1], BAND, final=False).verdict == "inconclusive"


def test_evidence_without_calibration_keeps_the_absolute_rule() -> None:
    judged = judge("forward call", 10.0, None, [Round(16.0), Round(17.0), Round(20.0)], BAND)
    assert judged.verdict == "failed" and "no calibration recorded" in judged.reason
    assert judge("forward call", 10.0, None, [Round(14.0)], BAND).verdict == "passed"
    # No band (the optimization gate's call): nothing is judged beyond passing.
    assert judge("forward call", 10.0, None, [Round(1e6)], float("inf")).verdict == "passed"
