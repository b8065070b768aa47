"""Bounded chaos: random SIGKILLs of the team lead and its workers during a run of many models.

Afterwards every task has reached a terminal state exactly once and the event log replays to
the board's state. The seed is fixed (CHAOS_SEED overrides it) so a failure can be replayed.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import (
    add_models,
    check_event_log,
    children_of,
    procs_in,
    run_tl,
    start_tl,
    statuses,
    wait_for,
)

pytestmark = pytest.mark.slow  # fast tier: kills real team-lead runs over and over

MODELS = 6
STAGES = ("discovery", "adaptation")
ROUNDS = 6


def test_random_sigkills_of_team_lead_and_workers(board: BoardStore, tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261129")))
    add_models(board, {f"org/c{i}": {} for i in range(MODELS)})
    # The kills come every 1-4 s, far more often than on any host: a task the kills keep hitting must
    # not end as interrupted too often (that limit has its own tests), so the budgets are wide.
    args = ("--stages", ",".join(STAGES), "--workers", "3", "--attempts", "50", "--max-interruptions", "50")
    kills = {"team-lead": 0, "worker": 0}
    lead = None
    for _ in range(ROUNDS):
        if lead is None or lead.poll() is not None:
            lead = start_tl(board.path, tmp_path, *args, out=tmp_path / "chaos.out")
        time.sleep(rng.uniform(1.0, 4.0))
        if lead.poll() is not None:
            break  # everything finished before this round's kill
        workers = children_of(lead.pid)
        if workers and rng.random() < 0.5:
            victim = rng.choice(workers)
            try:
                os.kill(victim, signal.SIGKILL)
                kills["worker"] += 1
            except ProcessLookupError:
                pass
        else:
            lead.kill()
            lead.wait()
            kills["team-lead"] += 1
    assert lead is not None
    if lead.poll() is None:
        lead.wait(timeout=300)
    final = run_tl(board.path, tmp_path, *args, timeout=300)  # picks up whatever the kills left over
    assert final.returncode == 0, final.stderr[-3000:]
    assert sum(kills.values()) >= 3, kills
    st = statuses(board)
    assert all(st[(f"org/c{i}", s)] == "completed" for i in range(MODELS) for s in STAGES), st
    completions = check_event_log(board)
    assert len(completions) == MODELS * len(STAGES) and set(completions.values()) == {1}
    wait_for(lambda: procs_in(tmp_path / "adaptations") == [], 15, what="no process left behind")
