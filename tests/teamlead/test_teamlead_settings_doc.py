"""Every stage setting is documented once: the table in docs/teamlead.md names each key and its
environment variable (read from the settings classes themselves, so a new field must be listed)."""

from __future__ import annotations

import pytest

from adaptation.healing.settings import HealingSettings
from ascendbridge.agents.settings import Budget
from ascendbridge.config import REPO_ROOT
from ascendbridge.settings import StageSettings, setting_keys
from benchmark.settings import BenchmarkSettings
from optimization.settings import OptimizationSettings

DOC = (REPO_ROOT / "docs" / "teamlead.md").read_text()


@pytest.mark.parametrize("cls", [BenchmarkSettings, OptimizationSettings, HealingSettings, Budget])
def test_every_setting_is_in_the_one_table(cls: type[StageSettings]) -> None:
    for key, env, _ in setting_keys(cls):
        assert f"| `{key}` | `{env}` |" in DOC, f"{key} ({env}) missing from docs/teamlead.md"


def test_precedence_is_settings_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_BENCHMARK_ITERS", "7")
    monkeypatch.setenv("ASCENDBRIDGE_HEALING_MAX_ATTEMPTS", "")  # empty: not set
    assert BenchmarkSettings.from_sources({"benchmark_iters": 20}).iters == 20
    assert BenchmarkSettings.from_sources({"optimization_iters": 20}).iters == 7  # another stage's key
    assert BenchmarkSettings.from_sources().warmup == 3
    assert HealingSettings.from_sources().max_attempts == 4
    with pytest.raises(ValueError, match="bad benchmark setting benchmark_dtypes: bad benchmark dtype"):
        BenchmarkSettings.from_sources({"benchmark_dtypes": "float8"})
