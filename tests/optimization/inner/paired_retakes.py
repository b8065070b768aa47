"""Inner script (torch environment): harness.paired re-times a CPU block until both sides ran a call
uninterrupted, and the search's sequential measurement sets aside a pair still unclean after that.

A call that sleeps stands in for a call the host's scheduler preempted, and the switch counter
(calibration.quiet_calls, which reads getrusage and is tested on its own in
tests/benchmark/test_benchmark_calibration.py) is replaced by TEST-ONLY `reported_switches`: a
call counts as switched out exactly when it slept. So the cases do not depend on the host's load
(beside busy loops the real counter also sees the spinning calls preempted).

    python paired_retakes.py REPO_ROOT

Prints one JSON object: per case, the figures harness.paired returned (samples and counts), and
`sequential_call_order`: which side (B, C) each call of two sequential one-block pairs timed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def session(kind: str) -> Any:
    """The few parts of a harness.Session that paired uses."""
    return SimpleNamespace(
        spec=SimpleNamespace(recipe=SimpleNamespace(seed=0)), sync=lambda: None, choice=SimpleNamespace(kind=kind)
    )


SLEEP_S = 0.02  # far above a spinning call's 1 ms, also when the load preempts it
SLEPT = [False]


def reported_switches(fn: Callable[[], Any], tally: list[int]) -> Callable[[], Any]:
    """TEST-ONLY stand-in for calibration.quiet_calls: one switch for a call that slept, else none."""

    def call() -> Any:
        SLEPT[0] = False
        value = fn()
        tally.append(int(SLEPT[0]))
        return value

    return call


def spin() -> None:
    """About 1 ms on the CPU without a switch of its own."""
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:
        pass


def interrupted(when: Callable[[int], bool]) -> Any:
    """A call of about 1 ms that sleeps (is switched out) on the n-th call where `when(n)`, else spins."""
    count = [0]

    def call() -> None:
        count[0] += 1
        if when(count[0]):
            SLEPT[0] = True
            time.sleep(SLEEP_S)  # switched out: the block's figure would carry this wait
        else:
            spin()

    return call


def interrupted_for(calls: int) -> Any:
    """Sleeps on its first `calls` calls, then spins."""
    return interrupted(lambda n: n <= calls)


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    from ab_runtime import calibration, harness

    calibration.quiet_calls = reported_switches
    from ab_runtime.optimize.optimize import sequential_paired

    def sequential(kind: str, base: Any) -> dict[str, Any]:
        """Three counted pairs of 3 calls, warmup 1, never decided early."""
        return sequential_paired(session(kind), base, spin, 3, 1, 3, lambda speedups: False)

    keys = (
        "baseline_samples_ms",
        "candidate_samples_ms",
        "retaken_blocks",
        "unclean_blocks",
        "uneven_blocks",
        "pairs",
        "set_aside_pair_speedups",
    )
    cases = {
        # warmup 1 takes the first call; the next 3 (one whole block's baseline side) sleep
        "first_block_interrupted": harness.paired(session("cpu"), interrupted_for(4), spin, 5, 1, 3),
        "always_interrupted": harness.paired(session("cpu"), interrupted_for(10**6), spin, 5, 1, 3),
        # warmup 1, blocks of 3: the first baseline call of every block sleeps
        "one_call_in_each_block_interrupted": harness.paired(
            session("cpu"), interrupted(lambda n: n % 3 == 2), spin, 5, 1, 3
        ),
        "both_always_interrupted": harness.paired(
            session("cpu"), interrupted_for(10**6), interrupted_for(10**6), 5, 1, 3
        ),
        "accelerator": harness.paired(session("cuda"), interrupted_for(4), spin, 5, 1, 3),
        # warmup 1, then the first pair's baseline calls sleep through its 1 + RETAKES tries (5 x 3)
        "sequential_first_pair_unclean": sequential("cpu", interrupted_for(1 + 5 * 3)),
        "sequential_always_unclean": sequential("cpu", interrupted_for(10**6)),
        "sequential_accelerator": sequential("cuda", interrupted_for(4)),
    }
    # calls at least LONG_CALL_MS long on both sides (lowered under the slept calls' 20 ms): a
    # preemption is noise at that length, so the same always-interrupted blocks are not re-timed
    harness.LONG_CALL_MS = SLEEP_S * 1000 * 0.75
    cases["long_calls_always_interrupted"] = harness.paired(
        session("cpu"), interrupted_for(10**6), interrupted_for(10**6), 5, 1, 3
    )
    order: list[str] = []
    sequential_paired(
        session("cpu"), lambda: order.append("B"), lambda: order.append("C"), 2, 0, 3, lambda speedups: False
    )
    report: dict[str, Any] = {name: {k: figures.get(k) for k in keys} for name, figures in cases.items()}
    print(json.dumps({**report, "sequential_call_order": "".join(order)}))


if __name__ == "__main__":
    main()
