"""Paired statistics and the keep rule (pure Python: the same file the runtime and the gate use)."""

from __future__ import annotations

import pytest

from optimization.notes_check import pairstats

stats = pairstats()


def test_sign_interval_rank_widens_with_few_pairs() -> None:
    assert stats.sign_interval_rank(5) == 1  # min..max: P(all five on one side) = 1/16 two-sided
    assert stats.sign_interval_rank(10) == 2
    assert stats.sign_interval_rank(20) == 6


def test_speedup_is_the_ratio_of_the_reported_medians() -> None:
    base = [[10.0, 11.0, 30.0], [10.5, 12.0, 10.2], [9.8, 50.0, 10.0], [10.1, 10.1, 10.1], [10.0, 10.3, 99.0]]
    cand = [[5.0, 5.2, 7.0], [5.1, 5.0, 5.5], [4.9, 5.0, 60.0], [5.3, 5.0, 5.0], [5.0, 5.0, 5.0]]
    r = stats.summarize_pairs(base, cand, warmup=2).as_dict()
    assert r["speedup"] == pytest.approx(r["baseline_median_ms"] / r["candidate_median_ms"])
    assert r["baseline_median_ms"] == 10.0 and r["candidate_median_ms"] == 5.0  # median of each block's best call
    assert r["interval"] == [min(r["pair_speedups"]), max(r["pair_speedups"])]
    assert len(r["baseline_samples_ms"]) == 15 and r["warmup"] == 2
    keep, reason = stats.gain_decision(r, "pass")
    assert keep and "beyond noise" in reason


def test_a_speedup_inside_the_noise_is_rejected() -> None:
    # Median looks 1.2x faster, but two of five pairs show the candidate slower: not a gain.
    base = [[10.0], [10.0], [10.0], [10.0], [10.0]]
    cand = [[8.0], [8.5], [8.2], [11.0], [10.5]]
    r = stats.summarize_pairs(base, cand, warmup=1).as_dict()
    assert r["speedup"] > 1.15
    keep, reason = stats.gain_decision(r, "pass")
    assert not keep and "no gain beyond noise" in reason


def test_accuracy_failure_and_slowdown_are_rejected() -> None:
    fast = stats.summarize_pairs([[10.0]] * 5, [[2.0]] * 5, warmup=0).as_dict()
    assert stats.gain_decision(fast, "fail") == (False, "accuracy failed against the baseline outputs")
    slow = stats.summarize_pairs([[10.0]] * 5, [[12.0]] * 5, warmup=0).as_dict()
    keep, reason = stats.gain_decision(slow, "pass")
    assert not keep and reason.startswith("slower")


def test_bad_blocks_raise() -> None:
    with pytest.raises(ValueError):
        stats.summarize_pairs([[1.0]], [[1.0], [2.0]], warmup=0)
    with pytest.raises(ValueError):
        stats.summarize_pairs([[]], [[1.0]], warmup=0)
