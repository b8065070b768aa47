"""Stable environments (ascendbridge/stable_envs.py): one per lock and profile, shared by packages and
attempts, never used half-synced; attempts carry no `.venv`; compiled kernels are reused."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ascendbridge import stable_envs
from ascendbridge.cli import board_ops
from ascendbridge.envmode import SYSTEM_MARKER
from ascendbridge.package import uv_env
from ascendbridge.workers import attempt_dir

LOCK = """version = 1
requires-python = ">=3.10"
resolution-markers = [
    "extra == 'extra-{n}-{name}-cpu'",
]

[[package]]
name = "{name}"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "torch", marker = "extra == 'extra-{n}-{name}-cpu'" }},
]

[[package]]
name = "torch"
version = "{torch}"
"""


def package(root: Path, name: str, torch: str = "2.13.0") -> Path:
    """A package directory with a pyproject naming it and a lock in uv's shape (the project's own
    name in its entry and in every extra's marker)."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0.1.0"\n')
    (directory / "uv.lock").write_text(LOCK.format(name=name, n=len(name), torch=torch))
    return directory


@pytest.fixture
def envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "envs"
    monkeypatch.setenv("ASCENDBRIDGE_STABLE_ENVS", str(root))
    return root


def fake_env(env: Path) -> None:
    (env / "bin").mkdir(parents=True, exist_ok=True)
    (env / "bin" / "python").write_text("")


def test_same_lock_same_env_other_lock_or_profile_another(tmp_path: Path, envs: Path) -> None:
    a, b = package(tmp_path, "ab-tiny-bert"), package(tmp_path, "ab-tiny-vit")
    other = package(tmp_path, "ab-tiny-llama", torch="2.9.1")
    assert a.joinpath("uv.lock").read_text() != b.joinpath("uv.lock").read_text()  # they differ by the name only
    assert stable_envs.env_dir(a, "cpu") == stable_envs.env_dir(b, "cpu")
    assert stable_envs.env_dir(a, "cpu").parent == envs  # type: ignore[union-attr]  # a path, asserted next
    assert stable_envs.env_dir(other, "cpu") != stable_envs.env_dir(a, "cpu")
    assert stable_envs.env_dir(a, "cuda") != stable_envs.env_dir(a, "cpu")
    (b / ".python-version").write_text("3.12\n")
    assert stable_envs.env_dir(b, "cpu") != stable_envs.env_dir(a, "cpu")
    assert stable_envs.env_dir(tmp_path / "nowhere", "cpu") is None  # no lock, no address


def test_stable_envs_off_means_each_package_its_own_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_STABLE_ENVS", "none")
    directory = package(tmp_path, "ab-tiny-bert")
    assert stable_envs.env_dir(directory, "cpu") is None
    assert stable_envs.python(directory) == directory / ".venv" / "bin" / "python"


def test_an_interrupted_sync_is_never_used_and_the_next_completes_it(tmp_path: Path, envs: Path) -> None:
    directory = package(tmp_path, "ab-tiny-bert")
    env = stable_envs.env_dir(directory, "cpu")
    assert env is not None
    calls = []

    def killed() -> SimpleNamespace:
        fake_env(env)  # the interpreter exists, the packages do not
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stable_envs.ensure(env, killed)
    assert not stable_envs.ready(env)
    assert stable_envs.python(directory) == directory / ".venv" / "bin" / "python"  # not the half-synced one
    assert stable_envs.ensure(env, lambda: SimpleNamespace(ok=False)) is not None and not stable_envs.ready(env)

    def completes() -> SimpleNamespace:
        calls.append(1)
        fake_env(env)
        return SimpleNamespace(ok=True)

    assert stable_envs.ensure(env, completes) is not None and stable_envs.ready(env)
    assert stable_envs.ensure(env, completes) is None and calls == [1]  # ready: reused, no second sync
    assert stable_envs.python(directory) == env / "bin" / "python"
    (directory / ".venv" / "bin").mkdir(parents=True)
    (directory / ".venv" / "bin" / "python").write_text("")
    assert stable_envs.python(directory) == directory / ".venv" / "bin" / "python"  # a package's own wins


def test_concurrent_syncs_of_one_env_run_one_at_a_time(tmp_path: Path, envs: Path) -> None:
    env = stable_envs.env_dir(package(tmp_path, "ab-tiny-bert"), "cpu")
    assert env is not None
    running, overlaps, syncs = [0], [], []

    def sync() -> SimpleNamespace:
        running[0] += 1
        overlaps.append(running[0])
        time.sleep(0.2)
        fake_env(env)
        syncs.append(1)
        running[0] -= 1
        return SimpleNamespace(ok=True)

    threads = [threading.Thread(target=stable_envs.ensure, args=(env, sync)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1] and syncs == [1]  # one synced; the others waited and reused it


def test_a_staging_copy_has_no_venv_and_promotion_keeps_the_packages_own(tmp_path: Path) -> None:
    live = tmp_path / "adaptations" / "tiny"
    (live / ".venv" / "bin").mkdir(parents=True)
    (live / ".venv" / "bin" / "python").write_text("a person's interpreter")
    (live / "demo.py").write_text("old")
    staging = attempt_dir.prepare(live, "healing", 7)
    assert sorted(p.name for p in staging.iterdir()) == ["demo.py"]
    (staging / "demo.py").write_text("new")
    attempt_dir.promote(staging, live)
    assert (live / "demo.py").read_text() == "new"
    assert (live / ".venv" / "bin" / "python").read_text() == "a person's interpreter"


def test_a_system_mode_venv_is_hard_linked_into_the_staging_copy(tmp_path: Path) -> None:
    """System mode's `.venv` is one interpreter's layer, the package's own by design: an attempt
    keeps it (hard links, no re-make), as before stable environments."""
    live = tmp_path / "adaptations" / "tiny"
    (live / ".venv" / "bin").mkdir(parents=True)
    (live / ".venv" / SYSTEM_MARKER).write_text(json.dumps({"mode": "system"}))
    staging = attempt_dir.prepare(live, "healing", 8)
    copied = staging / ".venv" / SYSTEM_MARKER
    assert copied.is_file() and copied.stat().st_ino == (live / ".venv" / SYSTEM_MARKER).stat().st_ino


def test_prune_removes_envs_unused_for_the_given_days(
    tmp_path: Path, envs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = stable_envs.env_dir(package(tmp_path, "ab-old", torch="2.7.1"), "cpu")
    new = stable_envs.env_dir(package(tmp_path, "ab-new"), "cpu")
    assert old is not None and new is not None
    for env in (old, new):
        stable_envs.ensure(env, lambda env=env: SimpleNamespace(ok=fake_env(env) is None))
    stamp = old.with_name(old.name + stable_envs.USED_SUFFIX)
    os.utime(stamp, (time.time() - 10 * 86400,) * 2)
    assert stable_envs.prune(7, dry_run=True) == [old] and old.is_dir()
    assert board_ops.main(["--json", "prune_envs", "--days", "7"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == [str(old)]
    assert not old.exists() and stable_envs.ready(new)
    assert stable_envs.prune(7) == []


def test_model_runs_get_the_kernel_caches_unless_already_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/a/persons/choice")
    env = uv_env.uv_environment()
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "kernels" / "inductor")
    assert env["TRITON_CACHE_DIR"] == "/a/persons/choice"


PROBE = """
import json, sys, torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
with torch.no_grad():
    torch.compile(model)(torch.randn(2, 16))
print("PROBE " + json.dumps({"python": sys.executable}))
"""


@pytest.mark.slow
def test_a_second_package_with_the_same_lock_reuses_the_env_and_its_compiled_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real tiny packages (different models, one resolution): the first syncs the stable
    environment, the second's sync is a reuse, and the same graph compiled in the second package's
    staging copy (no .venv) builds no C++ kernel the first did not already build."""
    from bench.support.tiny_adaptations import make_adaptation

    monkeypatch.setenv("ASCENDBRIDGE_STABLE_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("ASCENDBRIDGE_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    builds = lambda: len(list((tmp_path / "kernels" / "inductor").rglob("*.so")))  # noqa: E731
    seen = []
    for name in ("tiny-bert", "tiny-vit"):
        live = make_adaptation(tmp_path, name)
        assert uv_env.lock(live).ok
        (live / "probe.py").write_text(PROBE)
        directory = attempt_dir.prepare(live, "optimization", 1)
        sync = uv_env.sync(directory, "cpu")
        assert sync.ok, sync.output[-2000:]
        before = builds()
        run = uv_env.run_in_env(directory, ["probe.py"])
        assert run.ok, run.output[-3000:]
        line = next(ln for ln in run.output.splitlines() if ln.startswith("PROBE "))
        seen.append((sync.output, json.loads(line.removeprefix("PROBE "))["python"], builds() - before))
        assert not (directory / ".venv").exists()
    (first_sync, first_python, first_builds), (second_sync, second_python, second_builds) = seen
    env = stable_envs.env_dir(live, "cpu")
    assert first_python == second_python == str(env / "bin" / "python")  # type: ignore[operator]  # asserted path
    assert "reused" not in first_sync and "reused" in second_sync
    assert first_builds > 0 and second_builds == 0
