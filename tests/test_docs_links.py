"""Every repository path a comment, docstring or doc cites exists.

Scans the tracked `*.py`, `*.md`, `*.sh` and `*.j2` files for three kinds of citation and fails on
one that names nothing in the tree, so a rename or a removed file cannot leave a stale pointer:
a path from a top-level folder of the repository (`ascendbridge/board/leases.py`, `docs/x.md`,
`tests/`): it must end in a file suffix or `/` to count, so prose like "discovery/adaptation" is
not a path; a bare root document name in capitals (`README.md`, `CLAUDE.md`); a relative Markdown
link (`[text](board.md)`), resolved from the linking file. What a run makes (generated packages,
logs, agent memory) is not cited as a file of the tree. No file may point outside the repository at
the shared folder next to it either.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()
SCANNED = (".py", ".md", ".sh", ".j2")
# What is made at run time (a citation of it names what a run leaves, not a file of the tree): the
# generated packages, logs, and the agents' memory files.
GENERATED = ("adaptations/", "logs/", ".claude/agent-memory/")
GENERATED_DOCS = ("MEMORY.md",)
SUFFIXES = ("py", "md", "sh", "j2", "json", "jsonl", "toml", "lock", "txt", "html", "js", "css", "png", "yaml", "yml")
OUTSIDE = "../" + "shared"  # split so this file does not cite it itself


@cache
def tracked() -> tuple[str, ...]:
    """The repository's tracked files (git's view: untracked and ignored files are not the tree)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return tuple(name for name in out.decode().split("\0") if name)


@cache
def tree() -> frozenset[str]:
    """Every tracked file and every folder above one, folders with a trailing `/`."""
    names: set[str] = set()
    for name in tracked():
        names.add(name)
        parts = PurePosixPath(name).parts
        names.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return frozenset(names)


@cache
def path_pattern() -> re.Pattern[str]:
    """A path from a top-level folder of the tree: not inside a longer path or a dotted name, and
    ending in a file suffix or a `/`."""
    tops = sorted({n.split("/")[0] for n in tracked() if "/" in n}, key=len, reverse=True)
    suffix = "|".join(SUFFIXES)
    return re.compile(
        rf"(?<![\w./<>-])((?:{'|'.join(map(re.escape, tops))})/(?:[\w.-]+/)*(?:(?:[\w-]+\.)+(?:{suffix})|))"
        rf"(?!\.?[\w<*{{-])"
    )


ROOT_DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z_]+\.md)\b")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def citations(name: str, text: str) -> Iterator[tuple[int, str, str]]:
    """(line, cited text, the tree path it must be) for each citation in one file's text."""
    for number, line in enumerate(text.splitlines(), 1):
        for match in path_pattern().finditer(line):
            yield number, match.group(1), match.group(1)
        for match in ROOT_DOC.finditer(line):
            if match.group(1) not in GENERATED_DOCS:
                yield number, match.group(1), match.group(1)
        if name.endswith(".md"):
            for match in MD_LINK.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-z]+:", target) or target.startswith("/"):
                    continue
                resolved = PurePosixPath(name).parent / target
                parts: list[str] = []
                for part in resolved.parts:
                    if part == "..":
                        if not parts:
                            parts = ["..", "outside"]
                            break
                        parts.pop()
                    elif part != ".":
                        parts.append(part)
                yield number, target, "/".join(parts) + ("/" if target.endswith("/") else "")


def scanned_files() -> Iterator[tuple[str, str]]:
    """(name, text) of each scanned file; a link (AGENTS.md -> CLAUDE.md) is read once, as its target."""
    for name in tracked():
        if name == SELF:  # its examples of stale citations are the point
            continue
        if name.endswith(SCANNED) and (REPO / name).is_file() and not (REPO / name).is_symlink():
            yield name, (REPO / name).read_text(encoding="utf-8", errors="replace")


def missing(name: str, text: str) -> list[str]:
    """`file:line: cited` for each citation in `text` that names nothing in the tree."""
    names = tree()
    return [
        f"{name}:{line}: {cited}"
        for line, cited, path in citations(name, text)
        if path not in names and path + "/" not in names and not path.startswith(GENERATED)
    ]


def test_every_cited_path_exists() -> None:
    bad = [problem for name, text in scanned_files() for problem in missing(name, text)]
    assert not bad, "citations of files that do not exist:\n" + "\n".join(bad)


def test_nothing_cites_the_shared_folder() -> None:
    bad = [
        f"{name}:{n}"
        for name, text in scanned_files()
        for n, line in enumerate(text.splitlines(), 1)
        if OUTSIDE in line
    ]
    assert not bad, f"files citing {OUTSIDE}:\n" + "\n".join(bad)


def test_the_scan_sees_a_stale_citation() -> None:
    """Each kind of citation is found, and a real one passes."""
    text = (
        "see ascendbridge/board/gone.py and `MISSING.md`; [x](nowhere.md), [y](board.md),\n"
        "tests/test_layout.py, ascendbridge/board/, discovery/adaptation, adaptations/x/y.py, MEMORY.md,\n"
        "benchmark/templates/accuracy_run.py.j2 (not benchmark/templates/accuracy_run.py)\n"
    )
    assert missing("docs/page.md", text) == [
        "docs/page.md:1: ascendbridge/board/gone.py",
        "docs/page.md:1: MISSING.md",
        "docs/page.md:1: nowhere.md",
        "docs/page.md:3: benchmark/templates/accuracy_run.py",
    ]
    assert missing("x.py", "a [link](nowhere.md) only counts in Markdown") == []
