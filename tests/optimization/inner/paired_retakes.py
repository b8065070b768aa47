"""Inner script (torch environment): harness.paired re-times a CPU block until both sides ran a call
uninterrupted. A call that sleeps (time.sleep: a voluntary context switch, the kind
of interruption a test can cause for certain) stands in for a call the host's scheduler preempted.

    python paired_retakes.py REPO_ROOT

Prints one JSON object: per case, the figures harness.paired returned (samples and counts).
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Any


def session(kind: str) -> Any:
    """The few parts of a harness.Session that paired uses."""
    return SimpleNamespace(
        spec=SimpleNamespace(recipe=SimpleNamespace(seed=0)), sync=lambda: None, choice=SimpleNamespace(kind=kind)
    )


def interrupted_for(calls: int) -> Any:
    """A call of about 1 ms that sleeps (is switched out) on its first `calls` calls, then spins."""
    count = [0]

    def call() -> None:
        count[0] += 1
        if count[0] <= calls:
            time.sleep(0.004)  # switched out: the block's figure would carry these 4 ms
        else:
            end = time.perf_counter() + 0.001
            while time.perf_counter() < end:
                pass

    return call


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    from ab_runtime import harness

    def spin() -> None:
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass

    keys = ("baseline_samples_ms", "candidate_samples_ms", "retaken_blocks", "unclean_blocks", "uneven_blocks", "pairs")
    cases = {
        # warmup 1 takes the first call; the next 3 (one whole block's baseline side) sleep
        "first_block_interrupted": harness.paired(session("cpu"), interrupted_for(4), spin, 5, 1, 3),
        "always_interrupted": harness.paired(session("cpu"), interrupted_for(10**6), spin, 5, 1, 3),
        "one_call_interrupted": harness.paired(session("cpu"), interrupted_for(2), spin, 5, 1, 3),
        "both_always_interrupted": harness.paired(
            session("cpu"), interrupted_for(10**6), interrupted_for(10**6), 5, 1, 3
        ),
        "accelerator": harness.paired(session("cuda"), interrupted_for(4), spin, 5, 1, 3),
    }
    print(json.dumps({name: {k: figures[k] for k in keys} for name, figures in cases.items()}))


if __name__ == "__main__":
    main()
