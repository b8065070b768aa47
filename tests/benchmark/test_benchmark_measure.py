"""Timing rules of ab_runtime/measure.py, run for real in the shared torch environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import run_inner_json

SCRIPT = r"""
import json, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(sys.argv[1]).parent.parent))  # the framework's runtime package (relative imports)
from ab_runtime import measure as m
out = {}
x = torch.randn(256, 256)
t = m.time_forward(lambda: x @ x, lambda: None, warmup=2, iterations=7, seed=3)
out["timing"] = t.as_dict()
with torch.profiler.profile():
    try:
        m.time_forward(lambda: x @ x, lambda: None, 0, 1)
        out["refused"] = False
    except RuntimeError as exc:
        out["refused"] = str(exc)
seen = []
m.time_forward(lambda: seen.append(torch.rand(1).item()), lambda: None, warmup=3, iterations=2, seed=7)
torch.manual_seed(7)
out["reseeded"] = seen[3] == torch.rand(1).item() and seen[0] != seen[3]  # warmup cannot shift the timed calls
out["p90"] = m.percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured(python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    script = tmp_path_factory.mktemp("measure") / "m.py"
    script.write_text(SCRIPT)
    return run_inner_json(script, str(REPO_ROOT / "ab_runtime/measure.py"), python=python, timeout=300)


def test_timing_statistics_are_consistent(measured: dict) -> None:
    t = measured["timing"]
    assert t["iterations"] == 7 and t["warmup"] == 2 and len(t["samples_ms"]) == 7
    assert 0 < t["min_ms"] <= t["median_ms"] <= t["p90_ms"] and t["profiler_during_timing"] is False
    assert measured["p90"] == pytest.approx(9.1)


def test_timing_refuses_an_active_profiler_and_reseeds_after_warmup(measured: dict) -> None:
    assert "profiler" in measured["refused"]
    assert measured["reseeded"] is True
