"""Each agent test starts with no agent-history events kept in this process from an earlier one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ascendbridge import stage_events


@pytest.fixture(autouse=True)
def no_kept_history() -> Iterator[None]:
    stage_events.take_events()
    yield
    stage_events.take_events()
