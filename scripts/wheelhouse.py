"""Build the wheelhouse an air-gapped site needs, on a connected machine, from the locks.

    uv run scripts/wheelhouse.py --for cpu|cuda|ascend [--out wheelhouse] [--lock PATH ...]
        [--python 3.11] [--arch x86_64|aarch64]

Takes every package the locks pin for that target (the framework's uv.lock, each generated
package's uv.lock under the adaptations directory, a reference stack locked here the way a generated
package is, with the target's torch, and any `--lock` given; `--no-default-locks`: only those) and
writes one wheel per package, checked against the lock's sha256, with a PEP 503 `simple/` index. On the
site: `ASCENDBRIDGE_WHEELHOUSE=DIR` (docs/hosts.md); nothing else is then contacted. A package with
no wheel for the target is one `error:` line naming it (exit 1); already present files are kept.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from ab_runtime.fileops import atomic_path, sha256_file
from ascendbridge.cli_errors import EXIT_FAILURE, CliError, OneLineParser, run_guarded
from ascendbridge.config import REPO_ROOT, adaptations_dir, torch_source, uv_binary
from ascendbridge.package.generator import BASE_DEPENDENCIES, SHARDING_DEPENDENCY
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.pip_site import read_pip_site, redact, with_site
from ascendbridge.workers.process import run_command
from business_benchmark.lm_eval_path import LM_EVAL_REQUIREMENT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TARGETS = ("cpu", "cuda", "ascend")
DEFAULT_ARCH = {"cpu": "x86_64", "cuda": "x86_64", "ascend": "aarch64"}  # Atlas servers: Kunpeng hosts
DOWNLOAD_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Wheel:
    """One wheel to put in the wheelhouse: where it comes from and the hash it must have."""

    filename: str
    source: str  # an http(s) URL or a local path
    sha256: str | None
    sdist: bool = False  # no wheel fits the site: its source distribution, built into one here


def target_tags(python: str, arch: str) -> list[Tag]:
    """The wheel tags a CPython `python` on manylinux `arch` installs, best first."""
    major, minor = (int(p) for p in python.split("."))
    platforms = [f"manylinux_2_{n}_{arch}" for n in range(40, 16, -1)] + [f"manylinux2014_{arch}", f"linux_{arch}"]
    version = (major, minor)
    return [*cpython_tags(version, platforms=platforms), *compatible_tags(version, f"cp{major}{minor}", platforms)]


def target_environment(python: str, arch: str) -> dict[str, str]:
    """The marker environment of the site (so a lock exported here selects the site's packages)."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "platform_machine": arch,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def pinned(lock: Path, target: str, env: dict[str, str]) -> list[Requirement]:
    """`name==version` of every package the lock installs for `target` on the site: the device
    extra for a generated package (its extras conflict), every extra for other projects."""
    project = tomllib.loads((lock.parent / "pyproject.toml").read_text()).get("project", {})
    extras = set(project.get("optional-dependencies", {}))
    choice = ["--extra", target] if set(TARGETS) <= extras else ["--all-extras"]
    res = run_command(
        [
            uv_binary(),
            "export",
            "--frozen",
            "--no-emit-project",
            "--no-hashes",
            "--no-header",
            "--no-annotate",
            *choice,
        ],
        cwd=lock.parent,
        timeout_s=120,
    )
    if not res.ok:
        raise CliError(f"uv export of {lock} failed: {res.tail_line()}", code=EXIT_FAILURE)
    wanted = []
    for line in res.output.splitlines():
        if line.strip() and not line.startswith(("#", "-", " ")):
            req = Requirement(line)
            if req.marker is None or Marker(str(req.marker)).evaluate(env):
                wanted.append(req)
    return wanted


def lock_wheel(entry: dict[str, Any], tags: list[Tag], lock: Path) -> Wheel:
    """The best wheel of one lock entry for the site's tags; an error naming it when none fits."""
    rank = {tag: i for i, tag in enumerate(tags)}
    best: tuple[int, dict[str, Any]] | None = None
    for wheel in entry.get("wheels", []):
        name = unquote((wheel.get("url") or wheel.get("path") or wheel.get("filename", "")).rsplit("/", 1)[-1])
        fits = [rank[t] for t in parse_wheel_filename(name)[3] if t in rank]
        if fits and (best is None or min(fits) < best[0]):
            best = (min(fits), {**wheel, "filename": name})
    sdist = entry.get("sdist", {})
    if best is None and sdist.get("url"):
        digest = (sdist.get("hash") or "").removeprefix("sha256:") or None
        return Wheel(unquote(sdist["url"].rsplit("/", 1)[-1]), sdist["url"], digest, sdist=True)
    if best is None:
        raise CliError(
            f"no wheel of {entry['name']}=={entry['version']} for {tags[0]} in {lock} "
            f"({'no sdist either' if not entry.get('wheels') else 'other platforms only'}): "
            f"build one on a {tags[0].platform} machine and pass its directory as a pip find-links",
            code=EXIT_FAILURE,
        )
    wheel = best[1]
    registry = entry.get("source", {}).get("registry", "")
    source = wheel.get("url") or str(Path(registry) / wheel["path"] if registry else wheel["path"])
    digest = (wheel.get("hash") or "").removeprefix("sha256:") or None
    return Wheel(wheel["filename"], source, digest)


def _download(source: str, sha256: str | None, target: Path, client: httpx.Client) -> None:
    """Copy or download `source` to `target` (replaced only when complete: the one atomic write,
    ab_runtime.fileops.atomic_path), checking its sha256."""
    with atomic_path(target) as part:
        if source.startswith(("http://", "https://")):
            try:
                with client.stream("GET", source) as response, part.open("wb") as out:
                    response.raise_for_status()
                    for chunk in response.iter_bytes():
                        out.write(chunk)
            except httpx.HTTPError as exc:
                raise CliError(f"{target.name}: {redact(source)}: {exc}", code=EXIT_FAILURE) from None
        elif not Path(source).is_file():
            raise CliError(f"{target.name}: {source} is not there (the lock's find-links)", code=EXIT_FAILURE)
        else:
            shutil.copyfile(source, part)
        if sha256 and sha256_file(part) != sha256:
            raise CliError(f"{target.name}: sha256 differs from the lock's", code=EXIT_FAILURE)


def fetch(wheel: Wheel, out: Path, client: httpx.Client, tags: list[Tag]) -> None:
    """Put one wheel into `out` (kept when already there); an sdist is built into a wheel here,
    which must fit the site (a pure-Python one does; a compiled one only for this machine's kind)."""
    target = out / wheel.filename
    if not wheel.sdist:
        if not (target.is_file() and (wheel.sha256 is None or sha256_file(target) == wheel.sha256)):
            _download(wheel.source, wheel.sha256, target, client)
        return
    with tempfile.TemporaryDirectory() as scratch:
        sdist = Path(scratch) / wheel.filename
        _download(wheel.source, wheel.sha256, sdist, client)
        res = run_command(
            [uv_binary(), "build", "--wheel", "--out-dir", str(Path(scratch) / "built"), str(sdist)],
            env=with_site(),
            timeout_s=DOWNLOAD_TIMEOUT_S,
        )
        built = sorted((Path(scratch) / "built").glob("*.whl"))
        if not res.ok or not built:
            raise CliError(f"{wheel.filename} has no wheel and did not build: {res.tail_line()}", code=EXIT_FAILURE)
        if not set(parse_wheel_filename(built[0].name)[3]) & set(tags):
            raise CliError(
                f"no wheel of {built[0].name.split('-')[0]} for {tags[0]}: its sdist builds {built[0].name} here; "
                f"build it on a {tags[0].platform} machine and pass its directory as a pip find-links",
                code=EXIT_FAILURE,
            )
        shutil.copy(built[0], out / built[0].name)


def write_index(out: Path) -> int:
    """The PEP 503 `simple/` tree over every wheel in `out` (what uv reads as the site's index)."""
    by_project: dict[str, list[Path]] = {}
    for path in sorted(out.glob("*.whl")):
        by_project.setdefault(parse_wheel_filename(path.name)[0], []).append(path)
    simple = out / "simple"
    shutil.rmtree(simple, ignore_errors=True)
    for project, paths in by_project.items():
        (simple / project).mkdir(parents=True)
        links = "".join(
            f'<a href="../../{html.escape(p.name)}#sha256={sha256_file(p)}">{html.escape(p.name)}</a>\n' for p in paths
        )
        (simple / project / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    root = "".join(f'<a href="{p}/">{p}</a>\n' for p in by_project)
    simple.mkdir(exist_ok=True)
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{root}</body></html>\n")
    return len(by_project)


def reference_lock(target: str, python: str, directory: Path) -> Path:
    """The stack a generated package uses, locked here: transformers, the base set, accelerate,
    pillow, lm-eval (the business benchmark installs it) and the target's torch, from pip's
    find-links as the generator takes it (ascendbridge.package.generator), else the index; plus
    the framework's build backend, which installs the framework itself on the site."""
    profile = torch_source().profile(target)
    framework = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    requirements = [
        *framework["build-system"]["requires"],  # the framework's editable install on the site,
        "editables",  # which hatchling asks for (get_requires_for_build_editable)
        AdaptationSpec.model_fields["transformers_requirement"].default,
        *BASE_DEPENDENCIES,
        SHARDING_DEPENDENCY,
        "pillow",
        LM_EVAL_REQUIREMENT,
        *profile.requirements,
    ]
    lines = [
        "[project]",
        'name = "ascendbridge-reference-stack"',
        'version = "0"',
        f'requires-python = "=={python}.*"',
        f"dependencies = {json.dumps(requirements)}",
        "[tool.uv]",
        "package = false",
        f"find-links = {json.dumps([d for d in read_pip_site().find_links if Path(d).is_dir()])}",
    ]
    if profile.index_url:
        lines += ["[tool.uv.sources]", 'torch = { index = "torch" }', "[[tool.uv.index]]", 'name = "torch"']
        lines += [f"url = {json.dumps(profile.index_url)}", "explicit = true"]
    (directory / "pyproject.toml").write_text("\n".join(lines) + "\n")
    res = run_command([uv_binary(), "lock"], cwd=directory, env=with_site(), timeout_s=600)
    if not res.ok:
        raise CliError(f"locking the {target} reference stack failed: {res.tail_line()}", code=EXIT_FAILURE)
    return directory / "uv.lock"


def default_locks(target: str, python: str, scratch: Path) -> list[Path]:
    """The framework's lock, every generated package's lock, and the target's reference stack."""
    found = [REPO_ROOT / "uv.lock", *sorted(adaptations_dir().glob("*/uv.lock"))]
    return [*found, reference_lock(target, python, scratch)]


def plan(target: str, locks: list[Path], python: str, arch: str) -> dict[str, Wheel]:
    """filename -> wheel, for every package the locks and the torch pins need on the site."""
    tags, env = target_tags(python, arch), target_environment(python, arch)
    wheels: dict[str, Wheel] = {}
    for lock in locks:
        if not lock.is_file():
            raise CliError(f"--lock {lock}: no such file", code=2)
        entries = {(canonicalize_name(e["name"]), e["version"]): e for e in tomllib.loads(lock.read_text())["package"]}
        for req in pinned(lock, target, env):
            version = str(next(iter(req.specifier)).version)
            entry = entries.get((canonicalize_name(req.name), version))
            if entry is None:
                raise CliError(f"{req} is exported from {lock} but not in it: run `uv lock` there", code=EXIT_FAILURE)
            wheel = lock_wheel(entry, tags, lock)
            wheels[wheel.filename] = wheel
    return wheels


def main(argv: list[str]) -> int:
    parser = OneLineParser(description="Build an air-gapped site's wheelhouse from the locks.")
    parser.add_argument("--for", dest="target", choices=TARGETS, required=True, help="the site's device profile")
    parser.add_argument("--out", type=Path, default=Path("wheelhouse"), help="the wheelhouse directory")
    parser.add_argument("--lock", type=Path, action="append", default=[], help="another uv.lock to cover")
    parser.add_argument("--no-default-locks", action="store_true", help="only the --lock files")
    parser.add_argument("--python", default="3.11", help="the site's Python (X.Y, default 3.11)")
    parser.add_argument("--arch", choices=("x86_64", "aarch64"), help="default: x86_64, aarch64 for ascend")
    args = parser.parse_args(argv)

    def command() -> int:
        arch = args.arch or DEFAULT_ARCH[args.target]
        with tempfile.TemporaryDirectory() as scratch:
            locks = [] if args.no_default_locks else default_locks(args.target, args.python, Path(scratch))
            locks += [p.absolute() for p in args.lock]
            wheels = plan(args.target, locks, args.python, arch)
        args.out.mkdir(parents=True, exist_ok=True)
        with httpx.Client(timeout=DOWNLOAD_TIMEOUT_S, follow_redirects=True) as client:
            for wheel in wheels.values():
                fetch(wheel, args.out, client, target_tags(args.python, arch))
        projects = write_index(args.out)
        print(f"wheelhouse {args.out}: {len(wheels)} wheels, {projects} projects; on the site: ASCENDBRIDGE_WHEELHOUSE")
        return 0

    return run_guarded(command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
