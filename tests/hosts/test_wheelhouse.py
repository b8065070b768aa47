"""scripts/wheelhouse.py builds a site's wheelhouse from a lock (downloads from a 127.0.0.1 index,
a wheel from a local find-links directory) that a package then syncs from with no server at all; a wheel that
is not there is one `error:` line naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge import pip_site
from ascendbridge.config import REPO_ROOT, uv_binary
from ascendbridge.envmode import EnvChoice
from ascendbridge.package import uv_env
from ascendbridge.stable_envs import python as package_python
from tests.hosts.site_index import PYPROJECT, build_wheel, index_tree, probe_wheels, serve

pytestmark = pytest.mark.slow  # real uv locks and syncs, a real HTTP server


def wheelhouse(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "wheelhouse.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_wheelhouse_for_cpu_then_an_offline_sync_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = index_tree(tmp_path / "registry", probe_wheels(tmp_path / "built"))
    find_links = tmp_path / "find-links"
    build_wheel(find_links, "torch", "2.13.0+cpu")  # a stand-in for the 200 MB CPU torch wheel
    project = tmp_path / "probe"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        PYPROJECT.replace('cpu = ["abhost-cpu"]', 'cpu = ["abhost-cpu", "torch==2.13.0"]')
        + f"find-links = [{str(find_links)!r}]\n"
    )
    for key in [k for k in os.environ if k.startswith(("UV_", "PIP_", "ASCENDBRIDGE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "wheelhouse"
    args = ["--for", "cpu", "--no-default-locks", "--lock", str(project / "uv.lock"), "--out", str(out)]
    with serve(index, auth=False) as (port, _):
        url = f"http://127.0.0.1:{port}/simple"
        assert subprocess.run([uv_binary(), "lock", "--default-index", url], cwd=project, timeout=120).returncode == 0
        built = wheelhouse(args, dict(os.environ))
    assert built.returncode == 0, built.stderr
    wheels = sorted(p.name for p in out.glob("*.whl"))
    assert wheels == [
        "abhost_base-1.0-py3-none-any.whl",
        "abhost_cpu-1.0-py3-none-any.whl",
        "torch-2.13.0+cpu-py3-none-any.whl",
    ]
    assert (out / "simple" / "abhost-cpu" / "index.html").is_file()

    # the site: no server, no find-links directory, the wheelhouse as its only source, a fresh cache
    shutil.rmtree(find_links)
    monkeypatch.setenv(pip_site.WHEELHOUSE_ENV, str(out))
    monkeypatch.setenv("ASCENDBRIDGE_STABLE_ENVS", str(tmp_path / "envs"))  # a fresh one: the sync runs
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "site-cache"))
    pip_site._site.cache_clear()
    try:
        res = uv_env.sync(project, "cpu", env=EnvChoice("locked"))
    finally:
        pip_site._site.cache_clear()
    assert res.ok, res.output
    assert package_python(project).is_file()


def test_a_lock_entry_with_no_wheel_for_the_site_is_named(tmp_path: Path) -> None:
    project = tmp_path / "probe"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\ndependencies = ["onlywin"]\n')
    (project / "uv.lock").write_text(
        'version = 1\nrevision = 3\nrequires-python = ">=3.10"\n\n'
        '[[package]]\nname = "onlywin"\nversion = "2.0"\nsource = { registry = "https://pypi.org/simple" }\n'
        'wheels = [{ url = "https://example.invalid/onlywin-2.0-cp311-cp311-win_amd64.whl", hash = "sha256:'
        + "0"
        * 64
        + '" }]\n\n'
        '[[package]]\nname = "p"\nversion = "0"\nsource = { virtual = "." }\n'
        'dependencies = [{ name = "onlywin" }]\n\n[package.metadata]\nrequires-dist = [{ name = "onlywin" }]\n'
    )
    args = ["--for", "cpu", "--no-default-locks", "--lock", str(project / "uv.lock"), "--out", str(tmp_path / "w")]
    res = wheelhouse(args, {**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert res.returncode == 1
    assert res.stderr.startswith("error: no wheel of onlywin==2.0 for cp311-cp311-manylinux_2_40_x86_64 in ")
    assert "(other platforms only)" in res.stderr and res.stderr.count("\n") == 1
