"""Dashboard fixtures: one real dashboard server per test module, on a seeded board."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dashboard.dash_support import TOKEN, Site, seed_board, served


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("dashboard")
    board_path, logs, adaptations = seed_board(root)
    with served(root, board_path, logs, adaptations) as url:
        yield Site(url, TOKEN, root, board_path, logs, adaptations)
