"""What the parts of one team-lead run share: its board, settings and executor, and the jobs it runs.

The team lead is composed of parts (recovery, dispatch, lease upkeep, verdicts, transitions,
shutdown; ascendbridge.teamlead.scheduler composes them). They all read and change one `RunState`,
so a part holds no state of its own that another could miss.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from ascendbridge.board.leases import LeaseBoard
from ascendbridge.stage_api import StageOutcome
from ascendbridge.stage_registry import StageRef
from ascendbridge.teamlead.eta import CostModel
from ascendbridge.teamlead.settings import TeamLeadSettings
from ascendbridge.workers.executor import Executor, Job, JobResult
from ascendbridge.workers.placement import DevicePool


@dataclass
class RunStats:
    """What this team-lead run did (for the summary table and the exit code)."""

    started: float = field(default_factory=time.monotonic)
    outcomes: Counter[str] = field(default_factory=Counter)
    not_runnable: dict[str, str] = field(default_factory=dict)

    @property
    def dispatched(self) -> int:
        return self.outcomes["dispatched"]


@dataclass
class Recheck:
    """An attempt whose gate was inconclusive, waiting (under its lease) for its gate to run again."""

    job: Job  # the attempt's job: its task, token, staging copy and log
    outcome: StageOutcome  # what the run proposed: recorded only when a re-check passes
    done: int  # re-checks run so far
    due: float  # monotonic time of the next one


class Steering(Protocol):
    """People's guidance and the healer's directives (ascendbridge.teamlead.guidance.BoardSteering):
    the loop says when, the steering writes the board through its own interface."""

    def apply_open(self) -> int: ...

    def send_back(self, model_id: str, from_stage: str, change: dict[str, Any], origin: str) -> object: ...

    def directives(self, model_id: str, stage: str) -> list[dict[str, Any]]: ...


@dataclass
class RunState:
    """One team-lead run's collaborators and the jobs it has in hand; every part changes these in place."""

    store: LeaseBoard
    settings: TeamLeadSettings
    executor: Executor
    refs: dict[str, StageRef]
    log: logging.Logger
    pool: DevicePool  # timed stages take devices (or, on a CPU-only host, core groups) from here
    steering: Steering | None  # people's guidance and the healer's directives; None: no steering
    costs: CostModel  # what each model's stages cost: the longest first
    runnable: list[str]  # the selected stages whose code loads
    stats: RunStats
    stop_requested: threading.Event = field(default_factory=threading.Event)
    jobs: dict[int, tuple[Job, int, int]] = field(default_factory=dict)  # task id -> (job, attempt row id, slot)
    free_slots: list[int] = field(default_factory=list)
    rechecks: dict[int, Recheck] = field(default_factory=dict)  # task id -> an inconclusive gate waiting
    idle: set[str] = field(default_factory=set)  # worker agents whose job ended since the last heartbeat
    unrecorded: list[JobResult] = field(default_factory=list)  # finished jobs the busy board has not taken yet
    used: set[str] = field(default_factory=set)  # worker agents this run has started
    lost: set[int] = field(default_factory=set)  # task ids of running jobs whose lease was lost (cancelled)

    def take_unrecorded(self) -> list[JobResult]:
        """The finished jobs a busy board left waiting, handed over once."""
        out = list(self.unrecorded)
        self.unrecorded.clear()
        return out


class Part:
    """One part of the team lead, over the run's shared state (the names the parts use most, short)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.store, self.settings, self.log = state.store, state.settings, state.log
