"""Dashboard fixtures: one real dashboard server per test module, on a seeded board."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.dashboard.dash_support import TOKEN, Site, seed_board, start_server


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("dashboard")
    board_path, logs, adaptations = seed_board(root)
    proc, url = start_server(root, board_path, logs, adaptations)
    try:
        yield Site(url, TOKEN, root, board_path, logs, adaptations)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
