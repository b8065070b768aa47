"""One settings model, documented in one table: docs/settings.md's table is generated from the
model (a new field, section or stage must be listed, with a meaning), every section refuses a bad
environment value the same way, and the model reaches a worker as its typed settings."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any, get_args

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.refusals import is_refusal
from ascendbridge.settings import (
    PathSettings,
    Settings,
    SettingsError,
    doc_meanings,
    doc_table,
    install,
    section,
    section_classes,
    setting_keys,
    settings_table,
)
from ascendbridge.settings import main as settings_doc_main
from ascendbridge.stage_api import StageContext
from ascendbridge.stages import STAGES
from ascendbridge.teamlead.cli import build_parser
from ascendbridge.teamlead.cli import main as teamlead_main
from ascendbridge.teamlead.settings import RunSettings
from ascendbridge.workers.payload import write
from benchmark.settings import BenchmarkSettings
from business_benchmark.settings import BusinessSettings
from healing.settings import HealingSettings
from tests.teamlead.tl_support import add_models, claimed_job

DOC = (REPO_ROOT / "docs" / "settings.md").read_text()


def test_the_one_table_is_the_model() -> None:
    table = doc_table(DOC)
    assert table and table == settings_table(doc_meanings(DOC)), (
        "docs/settings.md is out of date: uv run python -m ascendbridge.settings --write"
    )
    rows = [line for line in table.splitlines() if "`ASCENDBRIDGE_" in line]
    assert all(not line.rstrip().endswith("|  |") for line in rows), "a setting without a meaning"
    envs = {env for cls in section_classes().values() for _, env, _ in setting_keys(cls)}
    assert len(rows) == sum(len(setting_keys(cls)) for cls in section_classes().values())
    assert envs == set(doc_meanings(DOC)) and "ASCENDBRIDGE_BENCHMARK_ITERS" in envs
    assert settings_doc_main([]) == 0


def test_one_model_has_every_stage_and_the_kernel_sections() -> None:
    assert set(STAGES) <= set(section_classes())
    assert {"run", "paths", "envs", "devices", "general", "agent"} <= set(section_classes())
    settings = Settings.resolve()
    assert settings.of(BenchmarkSettings).iters == 10 and settings.of(RunSettings).workers == 2


def _numeric_fields() -> list[tuple[str, str]]:
    """(section, environment variable) of every int / float field of every section."""
    out = []
    for name, cls in section_classes().items():
        env = cls.env_names()
        for field, info in cls.model_fields.items():
            kinds = set(get_args(info.annotation)) or {info.annotation}
            if kinds & {int, float}:
                out.append((name, env[field]))
    return out


@pytest.mark.parametrize("name, env", _numeric_fields())
def test_a_bad_environment_value_is_the_same_refusal_in_every_section(
    name: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, "not-a-number")
    label = section_classes()[name].label or section_classes()[name].key_prefix.rstrip("_")
    with pytest.raises(
        SettingsError, match=rf"^bad {label} setting [a-z0-9_]+( \(--[a-z-]+ or \${env}\))?: "
    ) as caught:
        Settings.resolve()
    assert "\n" not in str(caught.value)


def test_set_names_keys_short_or_full_and_refuses_unknown_ones() -> None:
    assert Settings.resolve({"benchmark": {"iters": 5}}).of(BenchmarkSettings).iters == 5  # once silently ignored
    assert Settings.resolve({"benchmark": {"benchmark_iters": 6}}).of(BenchmarkSettings).iters == 6
    assert Settings.resolve({"business_benchmark": {"lm_eval": "a,b"}}).of(BusinessSettings).lm_eval_tasks == ("a", "b")
    with pytest.raises(SettingsError, match=r"^unknown benchmark setting 'iterations' \(known: .*iters"):
        Settings.resolve({"benchmark": {"iterations": 5}})
    with pytest.raises(SettingsError, match=r"^unknown settings section 'benchmarks' \(expected one of: run, "):
        Settings.resolve({"benchmarks": {"iters": 5}})
    with pytest.raises(SettingsError, match=r"^bad benchmark setting benchmark_iters: Input should be greater"):
        Settings.resolve({"benchmark": {"iters": 0}})


def test_a_worker_gets_the_team_leads_values_not_its_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_HEALING_MAX_ATTEMPTS", "6")
    resolved = Settings.resolve({"benchmark": {"iters": 5}})
    payload = resolved.payload()
    sent = json.loads(payload)  # only what differs from the defaults
    assert sent["benchmark"] == {"iters": 5} and sent["healing"] == {"max_attempts": 6}
    assert "paths" not in sent and sent["general"] == {}  # paths are host-local
    monkeypatch.setenv("ASCENDBRIDGE_BENCHMARK_ITERS", "9")  # the worker's own environment differs
    monkeypatch.setenv("ASCENDBRIDGE_BENCHMARK_WARMUP", "7")
    monkeypatch.delenv("ASCENDBRIDGE_HEALING_MAX_ATTEMPTS")
    worker = Settings.from_payload(payload, paths=PathSettings.from_sources({"board": "/tmp/b.db"}))
    assert worker == resolved.replace(worker.of(PathSettings))
    bench = worker.of(BenchmarkSettings)
    assert (bench.iters, bench.warmup, worker.of(HealingSettings).max_attempts) == (5, 3, 6)
    ctx = worker.for_stage("benchmark")
    assert ctx["benchmark_iters"] == 5 and ctx["agent_max_attempts"] == 2 and "healing_max_attempts" not in ctx
    install(worker)
    try:
        assert section(BenchmarkSettings).iters == 5 and str(section(PathSettings).board) == "/tmp/b.db"
    finally:
        install(None)
    assert section(BenchmarkSettings).iters == 9  # outside a worker: the environment
    with pytest.raises(SettingsError, match="^bad settings payload: "):
        Settings.from_payload('{"benchmark": {"iters": "many"}}')


def test_a_worker_refuses_a_bad_payload_in_one_line(board: BoardStore, tmp_path: Any) -> None:
    add_models(board, {"org/bad-settings": {}})
    job = claimed_job(
        board,
        "org/bad-settings",
        "benchmark",
        tmp_path / "work",
        tmp_path / "r.json",
        board=tmp_path / "b.db",
        settings={"benchmark": {"iters": 0}},
    )
    write(tmp_path / "job.json", job)
    proc = subprocess.run(
        [sys.executable, "-m", "ascendbridge.workers.worker", "--job", str(tmp_path / "job.json")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: bad settings payload: ")
    assert (
        proc.stderr.strip().count("\n") == 0 and not (tmp_path / "b.db").exists() and not (tmp_path / "r.json").exists()
    )


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
    with pytest.raises(
        ValueError,
        match=r"bad team-lead setting workers \(--workers or \$ASCENDBRIDGE_WORKERS\): .*less than or equal to 256",
    ):
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


@pytest.mark.parametrize(
    "target, bad",
    [
        ("healing.stage:HEALING_STAGE", {"healing_max_attempts": 0}),
        ("benchmark.stage:BENCHMARK_STAGE", {"benchmark_iters": "many"}),
        ("optimization.stage:OPTIMIZATION_STAGE", {"optimization_pairs": 3}),
        ("business_benchmark.stage:BUSINESS_BENCHMARK_STAGE", {"business_dtype": "float8"}),
        ("ascendbridge.revalidation.stage:REVALIDATION_STAGE", {"device": "tpu"}),
    ],
)
def test_a_bad_setting_is_the_same_refusal_in_every_stage(target: str, bad: dict[str, Any], tmp_path: Any) -> None:
    """Whichever stage reads it, a bad value fails the run before any work with one diagnosis:
    rule `bad_setting` (a refusal: the team lead does not retry it) and the one-line message."""
    module, _, attr = target.partition(":")
    stage = getattr(importlib.import_module(module), attr)
    model = SimpleNamespace(env_mode="", env_python=None, model_id="org/m", adaptation_name="m")
    ctx = StageContext(
        model=model,
        task=SimpleNamespace(),
        adaptation_dir=tmp_path,
        board_path=tmp_path / "b.db",  # type: ignore[arg-type]
        log=io.StringIO(),
        settings=bad,
    )
    outcome = stage.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "bad_setting" and is_refusal(outcome.diagnosis)
    assert outcome.summary.startswith("bad ") and " setting " in outcome.summary and "\n" not in outcome.summary
    assert list(tmp_path.iterdir()) == []  # nothing rendered, synced or written


def test_a_run_flags_help_states_what_its_setting_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The help is built from RunSettings, so the variable and default it states are the ones that
    act: set the variable a flag's help names and the setting changes; a bad flag value is one line."""
    helps = {a.option_strings[0]: a.help or "" for a in build_parser()._actions if a.option_strings}
    assert helps["--workers"] == "total concurrent tasks (1..256) [$ASCENDBRIDGE_WORKERS, default 2]"
    assert helps["--gate-recheck-delay"].endswith("[$ASCENDBRIDGE_GATE_RECHECK_S, default 60]")
    assert helps["--ray-address"].endswith("[$ASCENDBRIDGE_RAY_ADDRESS]")
    samples = {"executor": "ray", "ray_address": "10.0.0.1:6379", "devices": "cpu:0", "heartbeat_s": "20"}
    for name, flag in RunSettings.FLAGS.items():
        variable = helps[flag].rsplit("[$", 1)[1].split(",")[0].rstrip("]")
        value = samples.get(name, "120")  # a number every numeric run setting accepts
        monkeypatch.setenv(variable, value)
        assert str(getattr(RunSettings.from_sources(), name)).removesuffix(".0") == value, flag
        monkeypatch.delenv(variable)
    assert teamlead_main(["--once", "--workers", "abc"]) == 2
    assert teamlead_main(["--once", "--lease", "-1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: bad team-lead setting workers (--workers or $ASCENDBRIDGE_WORKERS): Input should be a valid integer, unable to parse string "
        "as an integer",
        "error: bad team-lead setting lease_s (--lease or $ASCENDBRIDGE_LEASE_S): Input should be greater than 0",
    ]
