"""The site's package sources (pip's mirror configuration, or a wheelhouse) carried over to uv.

Sites configure their index mirror for pip (pip.conf files, `PIP_*` variables); uv reads none of
that, so without this module every sync on such a host goes to the public registry and fails.
`uv_site_env()` returns the `UV_*` variables every uv call of the framework adds to its
environment. Standard library only: `run_main_job.sh` runs this file with a bare `python3`
before the framework's environment exists (`python3 ascendbridge/pip_site.py exec -- uv ...`).

Index URLs may carry credentials: they go only into child environments, never into messages
(`redact`), the board or generated files.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

WHEELHOUSE_ENV = "ASCENDBRIDGE_WHEELHOUSE"
PYPI_SIMPLE = "https://pypi.org/simple"
# uv variables that already say where packages come from: the user's own uv configuration wins.
UV_INDEX_VARS = ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_NO_INDEX")
_LISTS = ("extra-index-url", "trusted-host", "find-links")
_KEYS = ("index-url", "no-index", *_LISTS)
_TRUE = ("1", "true", "yes", "on")


@dataclass
class PipSite:
    """pip's effective package-source options (what `pip install` would use)."""

    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    trusted_hosts: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    no_index: bool = False
    warnings: list[str] = field(default_factory=list)

    def set(self, key: str, value: str) -> None:
        """One pip option as pip reads it (lists are whitespace-separated; later sources replace)."""
        if key == "index-url":
            self.index_url = value.strip() or None
        elif key == "no-index":
            self.no_index = value.strip().lower() in _TRUE
        else:
            items = value.split()
            attr = {"extra-index-url": "extra_index_urls", "trusted-host": "trusted_hosts", "find-links": "find_links"}
            setattr(self, attr[key], items)


def redact(url: str) -> str:
    """`url` with any password replaced by ***: the only form a URL takes in messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def config_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in its loading order (a later one overrides): global, user, then
    PIP_CONFIG_FILE; `PIP_CONFIG_FILE=/dev/null` loads none (as pip does)."""
    explicit = environ.get("PIP_CONFIG_FILE")
    if explicit == os.devnull:
        return []
    xdg_dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    home = Path(environ.get("HOME") or Path.home())
    user_config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(":") if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", user_config / "pip" / "pip.conf"]
    if explicit:
        files.append(Path(explicit))
    return files


def _parse_error(path: Path, exc: configparser.Error) -> str:
    """One line without the offending text (it may hold a password)."""
    line = getattr(exc, "lineno", None)
    if line is None and isinstance(exc, configparser.ParsingError) and exc.errors:
        line = exc.errors[0][0]
    where = f" at line {line}" if line else ""
    return f"warning: {path} is not a valid pip config ({type(exc).__name__}{where}); ignored: fix or remove it"


def read_pip_site(environ: Mapping[str, str] | None = None, files: Sequence[Path] | None = None) -> PipSite:
    """pip's package-source options from its files (sections [global] then [install]) and its
    `PIP_*` variables, which override files as in pip. Read raw: a `%` in a URL is literal."""
    environ = os.environ if environ is None else environ
    site = PipSite()
    for path in config_files(environ) if files is None else files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            site.warnings.append(
                _parse_error(path, exc)
                if isinstance(exc, configparser.Error)
                else f"warning: {path} is not UTF-8 text; ignored: fix or remove it"
            )
            continue
        for section in ("global", "install"):
            for key in _KEYS:
                if parser.has_option(section, key):
                    site.set(key, parser.get(section, key))
    for key in _KEYS:
        value = environ.get("PIP_" + key.upper().replace("-", "_"))
        if value is not None:
            site.set(key, value)
    return site


class SiteError(RuntimeError):
    """The site's package source is unusable (one line, with its remedy)."""


def wheelhouse_index(directory: str) -> str:
    """The index URL of a wheelhouse (scripts/wheelhouse.py writes its PEP 503 `simple/` tree)."""
    simple = Path(directory).expanduser().absolute() / "simple"
    if not simple.is_dir():
        raise SiteError(
            f"{WHEELHOUSE_ENV}={directory} has no simple/ index: build it with "
            f"`uv run scripts/wheelhouse.py --for cpu|cuda|ascend --out {directory}` on a connected machine"
        )
    return simple.as_uri()


def uv_site_env(environ: Mapping[str, str] | None = None, site: PipSite | None = None) -> dict[str, str]:
    """The `UV_*` variables that make uv use the site's sources: the wheelhouse alone when
    ASCENDBRIDGE_WHEELHOUSE is set (its local index replaces every other), else pip's
    configuration. Variables the environment already sets are left to it."""
    environ = os.environ if environ is None else environ
    wheelhouse = environ.get(WHEELHOUSE_ENV, "").strip()
    out: dict[str, str] = {}
    if wheelhouse:
        out = {"UV_DEFAULT_INDEX": wheelhouse_index(wheelhouse)}
        environ = {k: v for k, v in environ.items() if k not in UV_INDEX_VARS}  # nothing but the wheelhouse
    else:
        site = read_pip_site(environ) if site is None else site
        if not any(environ.get(v) for v in UV_INDEX_VARS):
            if site.index_url:
                out["UV_DEFAULT_INDEX"] = site.index_url
            if site.extra_index_urls:
                out["UV_EXTRA_INDEX_URL"] = " ".join(site.extra_index_urls)
                out["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # pip picks the best version over all indexes
        if site.trusted_hosts:
            out["UV_INSECURE_HOST"] = " ".join(site.trusted_hosts)
        if site.find_links:
            out["UV_FIND_LINKS"] = ",".join(site.find_links)
    return {k: v for k, v in out.items() if not environ.get(k)}


def _wheelhouse_setting() -> str:
    """envs.wheelhouse (ASCENDBRIDGE_WHEELHOUSE, or `--set envs.wheelhouse=DIR`) through the
    settings model; the plain variable when this file runs on its own (shell entry points)."""
    try:
        from ascendbridge.settings import EnvsSettings, section
    except ImportError:
        return os.environ.get(WHEELHOUSE_ENV, "").strip()
    return (section(EnvsSettings).wheelhouse or "").strip()


@lru_cache(maxsize=1)
def _site() -> tuple[dict[str, str], bool]:
    """(`uv_site_env()` of this process, whether a wheelhouse is the source), read once; pip
    config warnings printed once, one line each."""
    environ = {k: v for k, v in os.environ.items() if k != WHEELHOUSE_ENV}
    wheelhouse = _wheelhouse_setting()
    if wheelhouse:
        return uv_site_env({**environ, WHEELHOUSE_ENV: wheelhouse}), True
    site = read_pip_site(environ)
    if site.no_index:
        site.warnings.append(
            f"warning: pip's no-index is not carried to uv (uv has no variable for it): set {WHEELHOUSE_ENV}"
        )
    for line in site.warnings:
        print(line, file=sys.stderr)
    return uv_site_env(environ, site), False


def with_site(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) plus the site's uv variables: what every
    uv subprocess of the framework runs with. A wheelhouse replaces any index `env` names."""
    site, wheelhouse = _site()
    base = dict(os.environ if env is None else env)
    if wheelhouse:
        base = {k: v for k, v in base.items() if k not in UV_INDEX_VARS}
    return {**site, **base}


def _bare(url: str) -> str:
    """An index URL without credentials or a trailing slash, for comparing indexes."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host if parts.port is None else f"{host}:{parts.port}")).rstrip("/")


def _project_indexes(directory: Path) -> list[str]:
    """The indexes the project's pyproject.toml declares ([[tool.uv.index]])."""
    if sys.version_info >= (3, 11):  # a bare Python 3.10 has no TOML reader: no project indexes seen
        import tomllib

        try:
            data = tomllib.loads((directory / "pyproject.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError):
            return []
        indexes = data.get("tool", {}).get("uv", {}).get("index", [])
        return [i.get("url", "") for i in indexes if isinstance(i, dict)]
    return []


def lock_matches_site(directory: Path, env: Mapping[str, str]) -> bool:
    """Whether uv, run with `env`, accepts the lock as it is: every index the lock names is one
    uv is configured with. A lock made against PyPI on a host whose index is a mirror (or a
    wheelhouse) is not: `uv sync --locked` would call it out of date."""
    lock = directory / "uv.lock"
    if not lock.is_file():
        return True
    configured = [env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL") or PYPI_SIMPLE]
    configured += env.get("UV_EXTRA_INDEX_URL", "").split()
    configured += [item.split("=", 1)[-1] for item in env.get("UV_INDEX", "").split()]
    configured += _project_indexes(directory)
    known = {_bare(u) for u in configured if u}
    named = set(re.findall(r'source = \{ registry = "([a-z+]+://[^"]+)" \}', lock.read_text()))
    return all(_bare(u) in known for u in named)


def locked_sync_steps(
    directory: Path, uv: str, args: Sequence[str], requirements: Path, venv: Path | None = None
) -> list[list[str]]:
    """The commands that install exactly the lock's packages (`uv sync --locked ARGS`) from the
    site's index when the lock names another one: the lock exported with its hashes, then
    `uv pip sync` of that list into `venv`, default the project's `.venv` (`uv pip install` with `--inexact`,
    which keeps what else is installed), then a packaged project itself, editable as `uv sync`
    installs it (its entry points are its stages); the lock's own URLs are never used."""
    venv = venv or directory / ".venv"
    python = str(venv / "bin" / "python")
    chosen = [a for a in args if a not in ("--inexact", "--quiet")]
    steps = [[uv, "export", "--frozen", "--quiet", "--no-emit-project", *chosen, "-o", str(requirements)]]
    if not (venv / "bin" / "python").is_file():
        steps.append([uv, "venv", "--quiet", str(venv)])
    # --no-config: the project's own sources (a find-links directory of the host that generated it)
    # are not the site's; the exported list already pins every package.
    if "--inexact" in args:
        steps.append([uv, "pip", "install", "--no-config", "--python", python, "-r", str(requirements)])
    else:
        steps.append([uv, "pip", "sync", "--no-config", "--python", python, str(requirements)])
    lock = directory / "uv.lock"
    if lock.is_file() and re.search(r'source = \{ editable = "\." \}', lock.read_text()):
        # built by its build backend from the site's index (scripts/wheelhouse.py includes it)
        steps.append([uv, "pip", "install", "--no-config", "--no-deps", "--python", python, "-e", str(directory)])
    return steps


def missing_package_error(output: str, env: Mapping[str, str]) -> str | None:
    """uv's "not found" resolution failure as one line naming the missing package and the index."""
    found = re.search(r"you require\s+([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?[=<>!~]=?[^\s,]+)", output)
    if not found or "not found in the package registry" not in output and "no version of" not in output:
        return None
    index = redact(env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL") or PYPI_SIMPLE)
    return (
        f"error: {found.group(1)} is not in the site's package index {index}: add it there "
        f"(`uv run scripts/wheelhouse.py --for cpu|cuda|ascend` builds a wheelhouse on a connected machine)"
    )


def _sync(argv: list[str]) -> int:
    """`sync [UV SYNC ARGS]` in the current project: `uv sync --locked`, or the exported lock into
    `.venv` when the site's index is not the lock's (run_main_job.sh)."""
    uv = os.environ.get("UV_BIN") or "uv"
    directory = Path.cwd()
    try:
        env = with_site()
    except SiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if lock_matches_site(directory, env):
        return subprocess.run([uv, "sync", "--locked", *argv], env=env).returncode
    with tempfile.TemporaryDirectory() as tmp:
        for step in locked_sync_steps(directory, uv, argv, Path(tmp) / "req.txt"):
            res = subprocess.run(step, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if res.returncode != 0:
                message = missing_package_error(res.stdout, env)
                print(message or res.stdout.rstrip(), file=sys.stderr)
                return res.returncode
    return 0


def main(argv: list[str]) -> int:
    """`exec -- CMD...`: run CMD with the site's uv variables (and UV_FROZEN when the current
    directory's lock names another index); `sync [ARGS]`: sync the project in the current
    directory from its lock through the site's sources (shell entry points)."""
    if argv[:1] == ["sync"]:
        return _sync(argv[1:])
    if len(argv) < 3 or argv[:2] != ["exec", "--"]:
        print("usage: python3 ascendbridge/pip_site.py exec -- CMD [ARGS...] | sync [UV SYNC ARGS]", file=sys.stderr)
        return 2
    try:
        env = with_site()
    except SiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not lock_matches_site(Path.cwd(), env):  # never re-lock uv.lock against the site's index
        env.setdefault("UV_FROZEN", "1")
    os.execvpe(argv[2], argv[2:], env)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
