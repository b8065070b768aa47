"""The README's daily-use commands, run as written in a fresh clone with no `uv` on PATH.

A new user has uv only where the entry points bootstrapped it (.uv-bootstrap/bin/uv, here a link
to the framework's own uv so the test needs no PyPI); every command must still work: `./ab ...`,
`./run_auto_team_lead.sh`, `./team_lead_watchdog.sh`. The attempt of a model that cannot be
discovered shows a non-zero exit code, and `board_ops.py show` fits 100 columns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ascendbridge.config import uv_binary

# Where the suite keeps its host files (tests/conftest.py sets them for every run).
HOST_FILES = ("ASCENDBRIDGE_STAGE_HISTORY", "ASCENDBRIDGE_STABLE_ENVS", "ASCENDBRIDGE_KERNEL_CACHE")

pytestmark = pytest.mark.slow  # fast tier: clones the repository and runs its commands from scratch

REPO = Path(__file__).resolve().parents[2]
NARROW = 100


def _path_without_uv() -> str:
    dirs = [d for d in ("/usr/local/bin", "/usr/bin", "/bin") if not (Path(d) / "uv").exists()]
    return os.pathsep.join(dirs)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    target = tmp_path_factory.mktemp("fresh") / "AscendBridge"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    bootstrap = target / ".uv-bootstrap" / "bin"
    bootstrap.mkdir(parents=True)
    (bootstrap / "uv").symlink_to(uv_binary())
    return target


def run(clone: Path, command: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """One README line through bash, in the clone, with a PATH that has no uv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCENDBRIDGE_", "VIRTUAL_ENV", "UV_"))}
    # A new user's settings, but the suite's own host files: its runs must not feed the user's ETA
    # history, environments or kernel cache.
    env.update({name: os.environ[name] for name in HOST_FILES if name in os.environ})
    env.update(PATH=_path_without_uv(), HOME=os.environ.get("HOME", "/root"), COLUMNS="200")
    return subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)


def test_readme_commands_work_without_uv_on_path(clone: Path) -> None:
    assert shutil.which("uv", path=_path_without_uv()) is None
    assert "uv: command not found" in run(clone, "uv --version").stderr  # the situation of the issue
    steps = [
        ("./ab run scripts/board_ops.py init", 0),
        (
            "./ab run scripts/board_ops.py register_model --model_id demo/tiny-bert --source local "
            "--path demo_models/tiny-bert",
            0,
        ),
        (
            "./ab run scripts/board_ops.py register_model --model_id broken/no-config --source local "
            "--path demo_models",
            2,
        ),  # no config.json there: refused at registration
        (
            "./ab run scripts/board_ops.py register_model --model_id broken/no-config --source hf-cache "
            "--path demo_models",
            0,
        ),  # a directory, but no HF cache holding it: discovery fails
        ("./run_auto_team_lead.sh --stages discovery --attempts 1 --plain", 1),  # one model fails discovery
        ("./team_lead_watchdog.sh --help", 0),
        ("./ab run scripts/dashboard.py --help", 0),
    ]
    for command, expected in steps:
        proc = run(clone, command)
        assert proc.returncode == expected, (
            f"{command}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
        assert "command not found" not in proc.stderr and "not found" not in proc.stderr.split("\n")[0]
    shown = run(clone, "./ab run scripts/board_ops.py show broken/no-config")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= NARROW, max(lines, key=len)
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("attempts")) :]
    attempt = next(line for line in table if line.lstrip("│| ").startswith("discovery"))
    cells = [c.strip() for c in attempt.replace("│", "|").split("|") if c.strip()]
    assert cells[:3] == ["discovery", "1", "4"] and cells[4] == "failed", cells  # stage, #, exit 4 (not 0)
    wide = run(clone, "./ab run scripts/board_ops.py show broken/no-config --wide")
    assert "lease expires" in wide.stdout and "lease expires" not in shown.stdout
    ok = run(clone, "./ab run scripts/board_ops.py show demo/tiny-bert --json")
    assert '"exit_code": 0' in ok.stdout
