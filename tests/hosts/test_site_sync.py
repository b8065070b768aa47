"""A package syncs from the site's index mirror on 127.0.0.1 (Basic auth, the password written
%40-quoted in pip.conf) with the index its lock names switched off, and the password appears in
no log, lock or file of the package. Real uv, real HTTP servers, real pip.conf files."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge import pip_site
from ascendbridge.board import BoardStore, Registration
from ascendbridge.config import REPO_ROOT, uv_binary
from ascendbridge.envmode import EnvChoice
from ascendbridge.package import uv_env
from ascendbridge.stable_envs import python as package_python
from tests.hosts.site_index import PASSWORD, PYPROJECT, QUOTED_PASSWORD, USER, index_tree, probe_wheels, serve
from tests.teamlead.tl_support import tl_argv

pytestmark = pytest.mark.slow  # real uv syncs against HTTP servers

DEMO = REPO_ROOT / "demo_models"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Path]]:
    """(project locked against a 'public' index now gone, the mirror's directory, its request log),
    with pip.conf pointing at the mirror and the process's uv configuration cleared."""
    index = index_tree(tmp_path / "mirror", probe_wheels(tmp_path / "built"))
    project = tmp_path / "adaptations" / "probe"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    for key in [k for k in os.environ if k.startswith(("UV_", "PIP_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ASCENDBRIDGE_STABLE_ENVS", str(tmp_path / "envs"))  # a fresh one: every sync runs
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    with serve(index, auth=False) as (public, _):  # the registry the lock was made against
        lock = subprocess.run(
            [uv_binary(), "lock", "--default-index", f"http://127.0.0.1:{public}/simple"],
            cwd=project,
            env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "lock-cache")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert lock.returncode == 0, lock.stderr
    # from here on the lock's index is unreachable: a sync that used its URLs would fail
    with serve(index, auth=True) as (port, requests):
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = http://{USER}:{QUOTED_PASSWORD}@127.0.0.1:{port}/simple\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "site-cache"))
        pip_site._site.cache_clear()
        yield project, index, requests
    pip_site._site.cache_clear()


def assert_no_secret(*roots: Path) -> None:
    for root in roots:
        for path in [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]:
            data = path.read_bytes()
            assert PASSWORD.encode() not in data and QUOTED_PASSWORD.encode() not in data, path


def test_locked_sync_installs_the_locks_pins_from_the_mirror(site: tuple[Path, Path, Path], tmp_path: Path) -> None:
    project, _, requests = site
    log_path = tmp_path / "logs" / "sync.log"
    log_path.parent.mkdir()
    with open(log_path, "w") as log:
        res = uv_env.sync(project, "cpu", log=log, env=EnvChoice("locked"))
    assert res.ok, res.output
    python = package_python(project)
    shown = subprocess.run([str(python), "-c", "import abhost_cpu, abhost_base; print('ok')"], capture_output=True)
    assert shown.stdout.strip() == b"ok"
    assert "/simple/abhost-cpu/abhost_cpu-1.0-py3-none-any.whl" in requests.read_text()  # from the mirror
    assert_no_secret(project, log_path, tmp_path / "logs")


def test_a_package_locked_on_the_site_names_the_mirror_without_its_password(site: tuple[Path, Path, Path]) -> None:
    project, _, _ = site
    (project / "uv.lock").unlink()
    assert uv_env.lock(project).ok
    text = (project / "uv.lock").read_text()
    assert "127.0.0.1" in text
    res = uv_env.sync(project, "cpu", env=EnvChoice("locked"))  # now the plain `uv sync --locked`
    assert res.ok, res.output
    assert_no_secret(project)


def test_a_package_missing_from_the_mirror_is_one_line_naming_it(site: tuple[Path, Path, Path]) -> None:
    project, index, _ = site
    for path in (index / "simple" / "abhost-cpu").iterdir():
        path.unlink()
    (index / "simple" / "abhost-cpu" / "index.html").write_text("<html><body></body></html>\n")
    res = uv_env.sync(project, "cpu", env=EnvChoice("locked"))
    assert not res.ok
    assert res.output.count("\n") == 1
    assert res.output.startswith(
        "error: abhost-cpu==1.0 is not in the site's package index http://builder:***@127.0.0.1"
    )
    assert QUOTED_PASSWORD not in res.output


def test_the_shell_entry_points_sync_goes_through_the_mirror(site: tuple[Path, Path, Path]) -> None:
    """run_main_job.sh's step: `python3 -I ascendbridge/pip_site.py sync ARGS` in the project."""
    project, _, requests = site
    res = subprocess.run(
        [sys.executable, "-I", str(REPO_ROOT / "ascendbridge" / "pip_site.py"), "sync", "--extra", "cpu", "--quiet"],
        cwd=project,
        env={**os.environ, "UV_BIN": uv_binary()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (project / ".venv" / "bin" / "python").is_file()
    assert "abhost_base-1.0-py3-none-any.whl" in requests.read_text()
    assert QUOTED_PASSWORD not in res.stdout + res.stderr


def test_exec_hands_uv_the_mirror_and_freezes_a_lock_made_elsewhere(site: tuple[Path, Path, Path]) -> None:
    """`./ab ARGS`: uv gets the mirror, and UV_FROZEN so it never re-locks a lock made against PyPI."""
    project, _, _ = site
    show = "import os; print(os.environ.get('UV_FROZEN'), os.environ['UV_DEFAULT_INDEX'])"
    script = str(REPO_ROOT / "ascendbridge" / "pip_site.py")

    def site_exec() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", script, "exec", "--", sys.executable, "-c", show]
        return subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=60)

    res = site_exec()
    frozen, index = res.stdout.split()
    assert (frozen, index.startswith(f"http://{USER}:{QUOTED_PASSWORD}@127.0.0.1:")) == ("1", True)
    uv_env.lock(project)  # locked on the site: nothing to freeze
    res = site_exec()
    assert res.stdout.split()[0] == "None"


def test_a_team_lead_run_leaves_the_password_in_no_board_log_or_package(board: BoardStore, tmp_path: Path) -> None:
    """Discovery and Adaptation of a demo model by the real team lead (lock, sync, gate), with an
    extra index behind Basic auth in pip.conf: uv asks it for every package (it has none of them, so
    the host's usual sources serve them), and afterwards no file of the run holds the password."""
    index = index_tree(tmp_path / "mirror", probe_wheels(tmp_path / "built"))
    board.register_models([Registration(model_id="demo/tiny-gpt2", source="local", path=str(DEMO / "tiny-gpt2"))])
    with serve(index, auth=True) as (port, requests):
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nextra-index-url = http://{USER}:{QUOTED_PASSWORD}@127.0.0.1:{port}/simple\n")
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL")},
            "PIP_CONFIG_FILE": str(conf),
            "ASCENDBRIDGE_LOGS": str(tmp_path / "logs"),
            "ASCENDBRIDGE_ADAPTATIONS": str(tmp_path / "adaptations"),
        }
        res = subprocess.run(
            tl_argv(board.path, "--stages", "discovery,adaptation", "--attempts", "1"),
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert res.returncode == 0, res.stderr[-2000:]
    assert board.stage_statuses()["demo/tiny-gpt2"]["adaptation"] == "completed"
    assert "/simple/transformers/" in requests.read_text()  # the credentialed index was asked
    assert QUOTED_PASSWORD not in res.stdout + res.stderr
    assert_no_secret(*board.path.parent.glob(board.path.name + "*"), tmp_path / "logs", tmp_path / "adaptations")
