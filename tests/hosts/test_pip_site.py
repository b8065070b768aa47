"""A site's pip configuration carried over to uv (ascendbridge/pip_site.py): read raw (a `%` in a
password is literal), PIP_* over files, a malformed file one warning line without its secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge import pip_site
from ascendbridge.config import REPO_ROOT, torch_source
from ascendbridge.pip_site import (
    SiteError,
    lock_matches_site,
    missing_package_error,
    read_pip_site,
    redact,
    uv_site_env,
)

MIRROR = "https://builder:p%40ss%25w0rd@mirror.example.com/pypi/simple"
PIP_CONF = f"""[global]
index-url = {MIRROR}
extra-index-url = https://extra-one.example.com/simple
    https://extra-two.example.com/simple
trusted-host = mirror.example.com extra-one.example.com
find-links = /srv/wheels /srv/more-wheels
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pip_conf_with_percent_in_password_maps_to_uv(tmp_path: Path) -> None:
    conf = write(tmp_path / "pip.conf", PIP_CONF)
    site = read_pip_site({}, [conf])
    assert site.warnings == []
    assert site.index_url == MIRROR  # raw: %40 and %25 stay as written, no interpolation error
    assert uv_site_env({}, site) == {
        "UV_DEFAULT_INDEX": MIRROR,
        "UV_EXTRA_INDEX_URL": "https://extra-one.example.com/simple https://extra-two.example.com/simple",
        "UV_INDEX_STRATEGY": "unsafe-best-match",
        "UV_INSECURE_HOST": "mirror.example.com extra-one.example.com",
        "UV_FIND_LINKS": "/srv/wheels,/srv/more-wheels",
    }


def test_pip_variables_override_files_and_install_section_overrides_global(tmp_path: Path) -> None:
    first = write(tmp_path / "etc" / "pip.conf", PIP_CONF)
    second = write(
        tmp_path / "user" / "pip.conf",
        "[global]\nindex-url = https://user-mirror.example.com/simple\n[install]\ntrusted-host = only.example.com\n",
    )
    site = read_pip_site({}, [first, second])
    assert site.index_url == "https://user-mirror.example.com/simple"
    assert site.trusted_hosts == ["only.example.com"]
    assert site.extra_index_urls == ["https://extra-one.example.com/simple", "https://extra-two.example.com/simple"]
    env = {"PIP_INDEX_URL": "https://env.example.com/simple", "PIP_FIND_LINKS": "/env/wheels"}
    site = read_pip_site(env, [first, second])
    assert site.index_url == "https://env.example.com/simple"
    assert site.find_links == ["/env/wheels"]


def test_pip_config_file_variable_is_read_last_and_devnull_reads_none(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), "PIP_CONFIG_FILE": "/x/pip.conf"}
    files = pip_site.config_files(env)
    assert files[0] == tmp_path / "xdg" / "pip" / "pip.conf"
    assert files[-2:] == [tmp_path / ".config" / "pip" / "pip.conf", Path("/x/pip.conf")]
    assert pip_site.config_files({**env, "PIP_CONFIG_FILE": os.devnull}) == []


def test_the_users_own_uv_index_wins(tmp_path: Path) -> None:
    site = read_pip_site({}, [write(tmp_path / "pip.conf", PIP_CONF)])
    mapped = uv_site_env({"UV_INDEX_URL": "https://mine.example.com/simple"}, site)
    assert "UV_DEFAULT_INDEX" not in mapped and "UV_EXTRA_INDEX_URL" not in mapped
    assert mapped["UV_FIND_LINKS"] == "/srv/wheels,/srv/more-wheels"


def test_malformed_pip_conf_is_one_warning_without_its_secret(tmp_path: Path) -> None:
    conf = write(tmp_path / "pip.conf", f"index-url = {MIRROR}\n[global\n")
    site = read_pip_site({}, [conf])
    assert site.index_url is None
    assert len(site.warnings) == 1 and "\n" not in site.warnings[0]
    assert site.warnings[0].startswith(f"warning: {conf} is not a valid pip config")
    assert "p%40ss" not in site.warnings[0]


def test_malformed_pip_conf_through_the_entry_point_is_one_stderr_line(tmp_path: Path) -> None:
    """The shell entry points' path: a real `python3 -I ascendbridge/pip_site.py exec -- ...`."""
    conf = write(tmp_path / "bad.conf", f"[global]\nindex-url = {MIRROR}\n[global]\n")
    env = {**os.environ, "PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}
    env = {k: v for k, v in env.items() if not k.startswith("UV_") and k != "PIP_INDEX_URL"}
    script = "import os; print(os.environ.get('UV_DEFAULT_INDEX', 'unset'))"
    res = subprocess.run(
        [
            sys.executable,
            "-I",
            str(REPO_ROOT / "ascendbridge" / "pip_site.py"),
            "exec",
            "--",
            sys.executable,
            "-c",
            script,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning:") and "DuplicateSectionError at line 3" in lines[0]
    assert "p%40ss" not in res.stderr and "Traceback" not in res.stderr


def test_wheelhouse_replaces_every_index_and_needs_its_index(tmp_path: Path) -> None:
    with pytest.raises(SiteError, match=r"no simple/ index: build it with `uv run scripts/wheelhouse.py"):
        uv_site_env({pip_site.WHEELHOUSE_ENV: str(tmp_path)})
    (tmp_path / "simple").mkdir()
    mapped = uv_site_env({pip_site.WHEELHOUSE_ENV: str(tmp_path), "UV_INDEX_URL": "https://mine.example.com/simple"})
    assert mapped == {"UV_DEFAULT_INDEX": (tmp_path / "simple").as_uri()}


def test_a_lock_made_against_another_index_does_not_match_the_site(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "p"\nversion = "0"\n')
    write(tmp_path / "uv.lock", 'source = { registry = "https://pypi.org/simple" }\nsource = { registry = "/srv/w" }\n')
    assert lock_matches_site(tmp_path, {})
    assert lock_matches_site(tmp_path, {"UV_EXTRA_INDEX_URL": "https://extra.example.com/simple"})
    assert not lock_matches_site(tmp_path, {"UV_DEFAULT_INDEX": MIRROR})
    assert lock_matches_site(tmp_path, {"UV_DEFAULT_INDEX": MIRROR, "UV_EXTRA_INDEX_URL": "https://pypi.org/simple/"})


def test_missing_package_error_names_it_without_the_password() -> None:
    uv_output = (
        "error: No solution found when resolving dependencies\n  cause: Because six was not found in the "
        "package registry and you require six==1.17.0, we can conclude that your requirements are unsatisfiable.\n"
    )
    message = missing_package_error(uv_output, {"UV_DEFAULT_INDEX": MIRROR})
    assert message is not None and "\n" not in message
    assert message.startswith("error: six==1.17.0 is not in the site's package index https://builder:***@mirror")
    assert "p%40ss" not in message
    assert missing_package_error("error: something else\n", {}) is None
    assert redact("https://mirror.example.com/simple") == "https://mirror.example.com/simple"


def test_torch_source_reads_find_links_beside_a_percent_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old reader (an interpolating ConfigParser) raised on a `%` in the value it read."""
    wheels = tmp_path / "wheels%40site"
    wheels.mkdir()
    conf = write(tmp_path / "pip.conf", f"[global]\nindex-url = {MIRROR}\nfind-links = {wheels}\n")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("ASCENDBRIDGE_WHEEL_DIR", "auto")
    assert torch_source().wheel_dir == str(wheels)


def test_a_packaged_project_is_installed_itself_after_its_locked_pins(tmp_path: Path) -> None:
    """The framework's stages are entry points of its own distribution: without it, none is found."""
    write(tmp_path / "uv.lock", '[[package]]\nname = "ascendbridge"\nsource = { editable = "." }\n')
    steps = pip_site.locked_sync_steps(tmp_path, "uv", ["--quiet"], tmp_path / "req.txt")
    assert steps[-1] == [
        "uv",
        "pip",
        "install",
        "--no-config",
        "--no-deps",
        "--python",
        str(tmp_path / ".venv" / "bin" / "python"),
        "-e",
        str(tmp_path),
    ]
    write(tmp_path / "uv.lock", '[[package]]\nname = "probe"\nsource = { virtual = "." }\n')
    assert pip_site.locked_sync_steps(tmp_path, "uv", [], tmp_path / "req.txt")[-1][:3] == ["uv", "pip", "sync"]
