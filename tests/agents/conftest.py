"""Each agent test starts with no agent-history events kept in this process from an earlier one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ascendbridge.agents import history


@pytest.fixture(autouse=True)
def no_kept_history() -> Iterator[None]:
    history.take_events()
    yield
    history.take_events()
