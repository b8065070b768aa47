"""Fixtures shared by every test area: an isolated board and framework paths per test."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.settings import REPO_ROOT
from tests.support.fake_hub import FakeHubServer, serving

# The team lead records its board's stage durations in the host's stage history, the ETA's prior on
# later boards (ascendbridge/teamlead/history.py): the suite's runs must not teach the user's cache,
# so the suite (and every process it starts) gets a history of its own, removed at the end.
STAGE_HISTORY_ENV = "ASCENDBRIDGE_STAGE_HISTORY"
_own_history: list[Path] = []
# Packages the suite syncs share stable environments (ascendbridge/stable_envs.py) and compiled
# kernels with each other and with the next run, in the checkout's .cache, not the user's.
SUITE_CACHES = {
    "ASCENDBRIDGE_STABLE_ENVS": REPO_ROOT / ".cache" / "stable-envs",
    "ASCENDBRIDGE_KERNEL_CACHE": REPO_ROOT / ".cache" / "kernels",
}


def pytest_configure(config: pytest.Config) -> None:
    if STAGE_HISTORY_ENV not in os.environ:
        _own_history.append(Path(tempfile.mkdtemp(prefix="ab-test-stage-history-")))
        os.environ[STAGE_HISTORY_ENV] = str(_own_history[0] / "stage_history.json")
    for name, path in SUITE_CACHES.items():
        os.environ.setdefault(name, str(path))


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _own_history:
        shutil.rmtree(path, ignore_errors=True)


# The suite runs on pytest-xdist workers (`-n auto --dist loadgroup`, pyproject.toml). A worker
# builds its own session and module fixtures, so tests sharing an expensive one must share a worker:
# every test of a file is one group (its module fixtures are built once), and the tests of several
# files that use one of these session fixtures (built evidence, searches, tiny checkpoints) are one
# group with them.
SHARED_SESSION_FIXTURES = ("runs", "searches", "tiny_models", "weighted_models", "minilm", "tiny_runs")


def xdist_group_of(item: pytest.Item) -> str:
    """The group of one test: its expensive session fixture's, else its file's."""
    info = getattr(item, "_fixtureinfo", None)
    for name in SHARED_SESSION_FIXTURES:
        definitions = info.name2fixturedefs.get(name) if info is not None else None
        if definitions and definitions[-1].scope == "session":
            return f"{definitions[-1].baseid or '.'}::{name}"
    return item.nodeid.split("::", 1)[0]


# The fast tier (`./run_tests.sh -m "not slow"`, README and docs/testing.md) leaves out what makes a test slow: a
# fixture that builds or uses the shared torch environment (`python`, `torch_python`: real model
# runs), the shared evidence built with it (SHARED_SESSION_FIXTURES), a real Ray cluster, a real
# browser, or a real pipeline run behind the browser. Tests slow for another reason (a real
# team-lead run with model stages, fresh uv environments) carry an explicit @pytest.mark.slow.
SLOW_FIXTURES = frozenset(SHARED_SESSION_FIXTURES + ("python", "torch_python", "cluster", "browser", "real_site"))


def is_slow(item: pytest.Item) -> bool:
    """Whether the test belongs to the slow tier: marked so, or needing a slow fixture."""
    if any(item.get_closest_marker(m) for m in ("slow", "lm_eval", "scenario")):  # lm_eval builds its own torch env
        return True
    return not SLOW_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marks into groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture()
def board_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh board file; ASCENDBRIDGE_* paths point into tmp so nothing touches the repo."""
    path = tmp_path / "board.db"
    monkeypatch.setenv("ASCENDBRIDGE_BOARD", str(path))
    monkeypatch.setenv("ASCENDBRIDGE_LOGS", str(tmp_path / "logs"))
    monkeypatch.setenv("ASCENDBRIDGE_ADAPTATIONS", str(tmp_path / "adaptations"))
    (tmp_path / "adaptations").mkdir()
    return path


@pytest.fixture()
def board(board_path: Path) -> BoardStore:
    store = BoardStore.init(board_path)
    yield store
    store.close()


@pytest.fixture(scope="session")
def weighted_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Tiny BERT classifier and GPT-2 with saved weights and tokenizers (tests/support/weighted_models.py)."""
    from tests.support.weighted_models import build_weighted_models

    return build_weighted_models(tmp_path_factory.mktemp("weighted-models"))


@pytest.fixture()
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHubServer]:
    """The Hub stand-in (tests/support/fake_hub.py); HF_ENDPOINT points at it, downloads land in a
    tmp HF cache, no saved token. huggingface_hub and datasets read HF_ENDPOINT at import, so the
    code under test runs in a child process or reads HF_ENDPOINT itself (discovery does)."""
    with serving() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        from huggingface_hub import constants  # read once at import: undo an offline environment

        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved token
        yield server


@pytest.fixture(autouse=True)
def _model_env_mode_stays_in_its_test() -> Iterator[None]:
    """A stage run in-process for a `system`-mode model sets the process's environment mode and
    interpreter (ascendbridge.envmode.use_model_env, as a one-task worker would); put them back so
    that no later test on this worker syncs or probes devices in another test's mode."""
    from ascendbridge.envmode import ENV_MODE_VAR, SYSTEM_PYTHON_VAR

    saved = {name: os.environ.get(name) for name in (ENV_MODE_VAR, SYSTEM_PYTHON_VAR)}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
