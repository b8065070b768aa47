"""The dashboard on a board it cannot write (a read-only mount): every page and API answers from
a read-only SQLite connection; actions answer 409 in one line and write nothing."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.dashboard.dash_support import TOKEN, seed_board, served
from tests.support.read_only import read_only_view


def test_a_read_only_board_is_shown_and_actions_are_refused(tmp_path: Path) -> None:
    real, view = tmp_path / "real", tmp_path / "view"
    real.mkdir()
    view.mkdir()
    board_path, logs, adaptations = seed_board(real)
    with read_only_view(real, view), served(tmp_path, view / "board.db", logs, adaptations) as url:
        for path in ("/", "/api/models", "/models/acme/llama-tiny", "/api/events", "/metrics", "/reports"):
            assert httpx.get(url + path, timeout=10).status_code == 200, path
        r = httpx.post(
            url + "/api/models/acme/llama-tiny/priority",
            json={"priority": 3},
            headers={"X-AscendBridge-Token": TOKEN},
            timeout=10,
        )
        assert r.status_code == 409 and "read-only" in r.json()["error"], r.text
    assert "is not writable" in (tmp_path / "server.log").read_text()


def test_registering_a_path_that_is_not_a_model_directory_is_a_400(tmp_path: Path) -> None:
    board_path, logs, adaptations = seed_board(tmp_path)
    with served(tmp_path, board_path, logs, adaptations) as url:
        for path in ("/proc/self", "/etc", "/dev/null"):
            r = httpx.post(
                url + "/api/models",
                json={"model_id": "org/x", "source": "local", "path": path},
                headers={"X-AscendBridge-Token": TOKEN},
                timeout=10,
            )
            assert r.status_code == 400 and "path" in r.json()["error"], r.text
        assert "org/x" not in httpx.get(url + "/api/models?q=org/x", timeout=10).text
