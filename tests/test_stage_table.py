"""The stage table: each stage package's stage.toml is the one place its facts live.

The kernel names no stage (every table is derived from the descriptions), docs/architecture.md
shows the table as generated, and a broken description is one line that says what to fix.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge import stage_table
from ascendbridge.stage_table import DOC, StageTableError, markdown, order, read_description, with_table
from ascendbridge.stages import STAGES

REPO = Path(__file__).resolve().parents[1]

# Kernel strings equal to a stage name that are not the kernel naming a stage, or that are still
# left to move into the descriptions, each with its reason; (file, name) -> why. A stale entry fails.
ALLOWED: dict[tuple[str, str], str] = {
    ("ascendbridge/board/migrations.py", "discovery"): "a migration is frozen history: the order version 6 had",
    ("ascendbridge/board/migrations.py", "adaptation"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "healing"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "training"): "frozen history: version 6 added the training stage",
    ("ascendbridge/board/migrations.py", "benchmark"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "optimization"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "business_benchmark"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "serving"): "frozen history (V6_STAGE_ORDER)",
    ("ascendbridge/board/migrations.py", "quantization"): "frozen history: version 7 added the quantization stage",
    ("ascendbridge/board/registry.py", "training"): "the registration's training-job field, not the stage",
    ("ascendbridge/cli/board_views.py", "training"): "the model's training-job column, not the stage",
    ("ascendbridge/main_job.py", "adaptation"): "the adaptation-name column of the models table",
    ("ascendbridge/demo_models.py", "training"): "a path into the bundled corpus the demo's training job reads",
    ("ascendbridge/discovery/hub.py", "discovery"): "the Hub client reads the discovery stage's hub_timeout by "
    "its section name (discovery/settings.py); the library is shared with `board_ops discover`",
    ("ascendbridge/export/check_package.py", "optimization"): "a key of the export manifest",
    ("ascendbridge/gatekit/inner/recompute_accuracy.py", "optimization"): "a key of the evidence's metrics file",
    ("ascendbridge/revalidation/stage.py", "benchmark"): "left: re-validation re-runs these two stages by name",
    ("ascendbridge/revalidation/stage.py", "optimization"): "left: re-validation re-runs these two stages by name",
    ("ascendbridge/main_job.py", "serving"): "left: the main job installs the serve environment first",
    ("ascendbridge/run_summary.py", "serving"): "left: the summary's served table",
    ("ascendbridge/run_summary.py", "training"): "left: the summary's trained table",
    ("ascendbridge/run_summary.py", "quantization"): "left: the summary's quantized table",
    ("ascendbridge/package/quant_files.py", "quantization"): "the package's folder the quantization stage writes "
    "(as serve/ for serving), read by the dashboard and the serving stage",
    ("ascendbridge/board/queries.py", "business_benchmark"): "left: the dashboard's business results",
    ("ascendbridge/board/queries.py", "training"): "left: the dashboard's training results",
    ("ascendbridge/board/queries.py", "benchmark"): "left: the dashboard's workload figures",
    ("ascendbridge/cli/board_commands.py", "serving"): "left: `show` tells the serve command once served",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of `tree` (prose, not the kernel naming a stage)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def stage_names_in(path: Path, names: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(line, stage) for each string of `path` that is a stage name, or quotes one in SQL."""
    tree = ast.parse(path.read_text(), str(path))
    prose = _docstrings(tree)
    quoted = re.compile(r"'(" + "|".join(names) + r")'")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if node.value in names:
                yield node.lineno, node.value
            yield from ((node.lineno, m) for m in quoted.findall(node.value))


def test_the_kernel_names_no_stage() -> None:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted((REPO / "ascendbridge").rglob("*.py")):
        if path == Path(stage_table.__file__):
            continue
        for line, name in stage_names_in(path, STAGES):
            found.setdefault((str(path.relative_to(REPO)), name), []).append(line)
    unexplained = [
        f"{file}:{lines[0]} names stage '{name}'"
        for (file, name), lines in found.items()
        if (file, name) not in ALLOWED
    ]
    assert not unexplained, "the kernel names a stage (derive it from stage.toml):\n" + "\n".join(unexplained)
    stale = [f"{file} '{name}'" for file, name in ALLOWED if (file, name) not in found]
    assert not stale, "allowed but no longer found (remove from ALLOWED):\n" + "\n".join(stale)


def test_the_check_sees_a_stage_name(tmp_path: Path) -> None:
    code = tmp_path / "k.py"
    code.write_text('"""healing in prose is fine."""\nX = "healing"\nSQL = "WHERE stage = \'serving\'"\n')
    assert list(stage_names_in(code, STAGES)) == [(2, "healing"), (3, "serving")]


def test_the_architecture_doc_shows_the_generated_table() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert with_table(doc, markdown(stage_table.stage_table())) == doc, (
        "docs/architecture.md's stage table is stale: run `uv run python -m ascendbridge.stage_table --write`"
    )


def _package(root: Path, name: str, toml: str) -> str:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    (root / name / "gate.py").write_text("")
    (root / name / "stage.toml").write_text(toml)
    importlib.invalidate_caches()  # the finder of `root` saw the directory before this package
    return f"{name}.stage:STAGE"


ROW = 'name = "{name}"\n{after}summary = "s"\nrole = "r"\ntimeout_s = 1.0\nattempts = 1\nprompt_mode = "m"\ncheckers = ["gate.py"]\n'


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_descriptions_chain_into_the_pipeline_order(site: Path) -> None:
    a = read_description("st_a", _package(site, "st_a", ROW.format(name="st_a", after="")))
    b = read_description("st_b", _package(site, "st_b", ROW.format(name="st_b", after='after = "st_a"\n')))
    c = read_description("st_c", _package(site, "st_c", ROW.format(name="st_c", after='after = "st_b"\n')))
    assert [r.name for r in order([c, a, b])] == ["st_a", "st_b", "st_c"]
    assert a.package == site / "st_a" and not a.placement.timed and a.runs == "always"
    with pytest.raises(StageTableError, match="st_b, st_c all follow 'st_a'"):
        order([a, b, c.model_copy(update={"after": "st_a"})])
    with pytest.raises(StageTableError, match="st_c follow no stage of the chain"):
        order([a, c])


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        (None, r"st_x/stage.toml is missing: write the stage's stage.toml"),
        (ROW.format(name="st_y", after=""), r"names 'st_y'; make the two names equal"),
        (ROW.format(name="st_x", after="") + "colour = 1\n", r"colour: Extra inputs are not permitted"),
        (ROW.format(name="st_x", after="").replace("1.0", "-1.0"), r"timeout_s: Input should be greater than 0"),
        (ROW.format(name="st_x", after="").replace("gate.py", "check.py"), r"checker check.py does not exist"),
        (ROW.format(name="st_x", after="").replace("gate.py", "../gate.py"), r"must be a path inside"),
        ("name = [", r"st_x/stage.toml: "),
    ],
)
def test_a_broken_description_is_one_line_with_its_remedy(site: Path, toml: str | None, error: str) -> None:
    target = _package(site, "st_x", toml or "")
    if toml is None:
        (site / "st_x" / "stage.toml").unlink()
    with pytest.raises(StageTableError, match=error) as caught:
        read_description("st_x", target)
    assert "\n" not in str(caught.value)


def test_a_broken_installed_description_stops_every_command_with_one_line(site: Path) -> None:
    """A third-party stage whose stage.toml is wrong: the team lead refuses to start, in one line."""
    _package(site, "st_bad", ROW.format(name="st_bad", after='after = "nowhere"\n'))
    dist = site / "st_bad-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: st-bad\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ascendbridge.stages]\nst_bad = st_bad.stage:STAGE\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-m", "ascendbridge.teamlead", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "error: stages st_bad follow no stage of the chain: set their `after` to an existing stage\n"
