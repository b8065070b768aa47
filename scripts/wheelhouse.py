"""Build the wheelhouse an air-gapped site needs, on a connected machine, from the locks.

    uv run scripts/wheelhouse.py --for cpu|cuda|ascend [--out wheelhouse] [--lock PATH ...]
        [--python 3.11] [--arch x86_64|aarch64]

Takes every package the locks pin for that target (the framework's uv.lock, each generated
package's uv.lock under the adaptations directory, and any `--lock` given), plus the target's torch
pins (ascendbridge.config.torch_source) from pip's find-links directories, and writes one wheel per
package, each checked against the lock's sha256, with a PEP 503 `simple/` index beside them. On the
site: `ASCENDBRIDGE_WHEELHOUSE=DIR` (docs/hosts.md); nothing else is then contacted. A package with
no wheel for the target is one `error:` line naming it (exit 1); already present files are kept.
"""

from __future__ import annotations

import hashlib
import html
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from ascendbridge.cli.errors import EXIT_FAILURE, CliError, OneLineParser, run_guarded
from ascendbridge.config import REPO_ROOT, adaptations_dir, torch_source, uv_binary
from ascendbridge.pip_site import read_pip_site, redact
from ascendbridge.runtime.process import run_command

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
        name = (wheel.get("url") or wheel.get("path") or wheel.get("filename", "")).rsplit("/", 1)[-1]
        fits = [rank[t] for t in parse_wheel_filename(name)[3] if t in rank]
        if fits and (best is None or min(fits) < best[0]):
            best = (min(fits), {**wheel, "filename": name})
    if best is None:
        raise CliError(
            f"no wheel of {entry['name']}=={entry['version']} for {tags[0]} in {lock} "
            f"({'sdist only' if not entry.get('wheels') else 'other platforms only'}): "
            f"build one on a {tags[0].platform} machine and pass its directory as a pip find-links",
            code=EXIT_FAILURE,
        )
    wheel = best[1]
    registry = entry.get("source", {}).get("registry", "")
    source = wheel.get("url") or str(Path(registry) / wheel["path"] if registry else wheel["path"])
    digest = (wheel.get("hash") or "").removeprefix("sha256:") or None
    return Wheel(wheel["filename"], source, digest)


def local_wheel(req: Requirement, tags: list[Tag], dirs: list[str]) -> Wheel:
    """A torch pin (no lock names it until a package is generated) from pip's find-links dirs."""
    rank = {tag: i for i, tag in enumerate(tags)}
    found: list[tuple[int, Path]] = []
    for directory in dirs:
        for path in Path(directory).glob("*.whl") if Path(directory).is_dir() else []:
            name, version, _, wheel_tags = parse_wheel_filename(path.name)
            fits = [rank[t] for t in wheel_tags if t in rank]
            if name == canonicalize_name(req.name) and fits and req.specifier.contains(version, prereleases=True):
                found.append((min(fits), path))
    if not found:
        raise CliError(
            f"no wheel of {req} for {tags[0]} in pip's find-links ({', '.join(dirs) or 'none configured'}): "
            f"put it in one of them (pip download --no-deps --only-binary :all: '{req}')",
            code=EXIT_FAILURE,
        )
    path = min(found)[1]
    return Wheel(path.name, str(path), None)


def fetch(wheel: Wheel, out: Path, client: httpx.Client) -> None:
    """Copy or download one wheel into `out` (kept when already there), checking its sha256."""
    target = out / wheel.filename
    if target.is_file() and (wheel.sha256 is None or _sha256(target) == wheel.sha256):
        return
    with tempfile.NamedTemporaryFile(dir=out, suffix=".part", delete=False) as part:
        if wheel.source.startswith(("http://", "https://")):
            try:
                with client.stream("GET", wheel.source) as response:
                    response.raise_for_status()
                    for chunk in response.iter_bytes():
                        part.write(chunk)
            except httpx.HTTPError as exc:
                Path(part.name).unlink()
                raise CliError(f"{wheel.filename}: {redact(wheel.source)}: {exc}", code=EXIT_FAILURE) from None
        else:
            if not Path(wheel.source).is_file():
                raise CliError(
                    f"{wheel.filename}: {wheel.source} is not there (the lock's find-links)", code=EXIT_FAILURE
                )
            with open(wheel.source, "rb") as src:
                shutil.copyfileobj(src, part)
    if wheel.sha256 and _sha256(Path(part.name)) != wheel.sha256:
        Path(part.name).unlink()
        raise CliError(f"{wheel.filename}: sha256 differs from the lock's", code=EXIT_FAILURE)
    Path(part.name).replace(target)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
            f'<a href="../../{html.escape(p.name)}#sha256={_sha256(p)}">{html.escape(p.name)}</a>\n' for p in paths
        )
        (simple / project / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    root = "".join(f'<a href="{p}/">{p}</a>\n' for p in by_project)
    simple.mkdir(exist_ok=True)
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{root}</body></html>\n")
    return len(by_project)


def default_locks() -> list[Path]:
    """The framework's lock and every generated package's lock."""
    return [REPO_ROOT / "uv.lock", *sorted(adaptations_dir().glob("*/uv.lock"))]


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
    dirs = read_pip_site().find_links
    for text in torch_source().profile(target).requirements:
        wheel = local_wheel(Requirement(text), tags, dirs)
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
        locks = ([] if args.no_default_locks else default_locks()) + [p.absolute() for p in args.lock]
        wheels = plan(args.target, locks, args.python, args.arch or DEFAULT_ARCH[args.target])
        args.out.mkdir(parents=True, exist_ok=True)
        with httpx.Client(timeout=DOWNLOAD_TIMEOUT_S, follow_redirects=True) as client:
            for wheel in wheels.values():
                fetch(wheel, args.out, client)
        projects = write_index(args.out)
        print(f"wheelhouse {args.out}: {len(wheels)} wheels, {projects} projects; on the site: ASCENDBRIDGE_WHEELHOUSE")
        return 0

    return run_guarded(command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
