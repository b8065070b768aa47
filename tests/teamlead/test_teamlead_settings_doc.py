"""Every stage setting is documented once: the table in docs/teamlead.md names each key and its
environment variable (read from the settings classes themselves, so a new field must be listed)."""

from __future__ import annotations

import pytest

from healing.settings import HealingSettings
from ascendbridge.agents.settings import Budget
from ascendbridge.config import REPO_ROOT
from ascendbridge.settings import StageSettings, setting_keys
from ascendbridge.teamlead.settings import RunSettings
from benchmark.settings import BenchmarkSettings
from business_benchmark.settings import BusinessSettings
from optimization.settings import OptimizationSettings

DOC = (REPO_ROOT / "docs" / "teamlead.md").read_text()


@pytest.mark.parametrize("cls", [BenchmarkSettings, OptimizationSettings, HealingSettings, Budget,
                                 BusinessSettings, RunSettings])
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


def test_team_lead_and_business_settings_share_the_mechanism(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_WORKERS", "5")
    monkeypatch.setenv("ASCENDBRIDGE_LEASE_S", "30")
    assert RunSettings.from_sources({"workers": 7}).workers == 7  # the flag wins
    assert (RunSettings.from_sources().workers, RunSettings.from_sources().lease_s) == (5, 30.0)
    with pytest.raises(ValueError, match=r"bad team-lead setting workers \(--workers\): .*less than or equal to 256"):
        RunSettings.from_sources({"workers": 300})
    with pytest.raises(ValueError, match="heartbeat .* must be at most half the lease"):
        RunSettings.from_sources({"heartbeat_s": 20})
    monkeypatch.setenv("ASCENDBRIDGE_BUSINESS_LM_EVAL", "a,b c")
    monkeypatch.setenv("ASCENDBRIDGE_BUSINESS_BOUNDS", "label_agreement=0.99")
    business = BusinessSettings.from_sources({"business_rtol": 0.01})
    assert business.lm_eval_tasks == ("a", "b", "c") and business.rule.relative_tolerance == 0.01
    assert business.rule.bounds["label_agreement"] == ("min", 0.99)
    with pytest.raises(ValueError, match="bad business setting business_bounds: .*would loosen"):
        BusinessSettings.from_sources({"business_bounds": {"label_agreement": 0.5}})
    with pytest.raises(ValueError, match="bad business setting business_dtype: bad business dtype float8"):
        BusinessSettings.from_sources({"business_dtype": "float8"})
