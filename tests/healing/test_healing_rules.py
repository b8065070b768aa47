"""Each healing rule on a real failing case: the failure is produced by actually running code in
the shared torch environment (tests/healing/failing_cases.py), classified, and the rule's remedy
is checked to change the spec as intended."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.package.spec import AdaptationSpec, ModelSource
from ascendbridge.workers.process import run_command
from bench.support.torch_env import torch_env_python
from healing.classifier import UNCLASSIFIED, classify
from healing.failure import Failure
from healing.rules import RULES, Block, Fix, FixContext, GiveUp, Match, Rule, apply_changes, rule_named

CASES_SCRIPT = Path(__file__).with_name("failing_cases.py")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run every real failing case once (one process) and return {case: output}."""
    tmp = tmp_path_factory.mktemp("cases")
    out = tmp / "cases.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf-home"), TRANSFORMERS_VERBOSITY="error")
    res = run_command([str(torch_env_python()), str(CASES_SCRIPT), str(out)], env=env, timeout_s=300)
    assert res.exit_code == 0, res.tail(30)
    return json.loads(out.read_text())


def failure_of(output: str, phase: str = "dry_run") -> Failure:
    from ascendbridge.package.uv_env import parse_result

    return Failure(phase=phase, exit_code=1, timed_out=False, output=output, result=parse_result(output))


def make_spec(**updates: Any) -> AdaptationSpec:
    spec = AdaptationSpec(
        name="tiny",
        model=ModelSource(model_id="org/tiny", source="local", path="/nonexistent"),
        task_family="causal_lm",
        model_class="GPT2Model",
    )
    return apply_changes(spec, updates) if updates else spec


# case -> (rule, spec edits before, fix context, expected remedy: {path: value} | Block | GiveUp)
EXPECTED: dict[str, tuple[str, dict[str, Any], FixContext, Any]] = {
    "missing_module": ("missing_module", {}, FixContext(), {"dependencies/einops": ""}),
    "missing_module_remote_code": (
        "missing_module",
        {},
        FixContext(),
        {"dependencies/einops": "", "dependencies/timm": ""},
    ),
    "transformers_removed_name": (
        "transformers_version",
        {},
        FixContext(),
        {"transformers_requirement": "transformers>=4.46,<5"},
    ),
    "transformers_removed_module": (
        "transformers_version",
        {},
        FixContext(),
        {"transformers_requirement": "transformers>=4.46,<5"},
    ),
    "transformers_unexpected_kwarg": (
        "transformers_version",
        {},
        FixContext(),
        {"transformers_requirement": "transformers>=4.46,<5"},
    ),
    "transformers_too_old": (
        "transformers_version",
        {"transformers_requirement": "transformers>=4.46,<5"},
        FixContext(),
        {"transformers_requirement": "transformers>=4.46"},
    ),
    "pad_token": (
        "pad_token",
        {},
        FixContext(model_config={"eos_token_id": 99}),
        {"config_overrides/pad_token_id": 99},
    ),
    "dtype_unsupported": (
        "dtype_unsupported",
        {"dtype/target": "bfloat16"},
        FixContext(),
        {"dtype/fallback": "float32"},
    ),
    "out_of_memory": ("out_of_memory", {"inputs/batch_size": 4}, FixContext(), {"inputs/batch_size": 1}),
    "device_mismatch": ("device_mismatch", {}, FixContext(), {"set_default_device": True}),
    "remote_code": ("remote_code", {}, FixContext(allow_remote_code=False), Block),
    "gated_repo": ("gated_repo", {}, FixContext(), Block),
    "weights_unreachable": ("weights_unreachable", {}, FixContext(), Block),
    "missing_config_attribute": (
        "missing_config_attribute",
        {},
        FixContext(),
        {"config_overrides/layer_norm_eps": 1e-12},
    ),
    "sequence_too_long": (
        "sequence_too_long",
        {"inputs/seq_len": 32},
        FixContext(model_config={"n_positions": 16}),
        {"inputs/seq_len": 14},
    ),
    "sequence_too_long_expanded": ("sequence_too_long", {"inputs/seq_len": 32}, FixContext(), {"inputs/seq_len": 14}),
    "non_finite_outputs": (
        "non_finite_outputs",
        {"dtype/target": "float16"},
        FixContext(),
        {"dtype/fallback": "float32"},
    ),
    "npu_unavailable": ("device_unavailable", {}, FixContext(), Block),
}


def test_catalogue_has_at_least_twelve_named_unique_rules() -> None:
    names = [r.name for r in RULES]
    assert len(names) >= 12 and len(set(names)) == len(names)
    assert all(r.description for r in RULES)
    assert rule_named("missing_module").name == "missing_module"
    # Each rule answers: its own remedy, or the fixed `answer` the base's remedy returns.
    assert [r.name for r in RULES if type(r).remedy is Rule.remedy and r.answer is None] == []
    unreachable = rule_named("weights_unreachable")
    assert unreachable.remedy(make_spec(), Match("x"), FixContext()) is unreachable.answer


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.slow  # fast tier: real failing runs in a torch environment
def test_rule_on_real_failure(case: str, captured: dict[str, str]) -> None:
    rule_name, before, ctx, expected = EXPECTED[case]
    classification = classify(failure_of(captured[case]))
    assert classification.rule_name == rule_name, classification.failure.error
    spec = make_spec(**before)
    remedy = classification.rule.remedy(spec, classification.match, ctx)
    if isinstance(expected, dict):
        assert isinstance(remedy, Fix), remedy
        assert remedy.changes == expected
        fixed = apply_changes(spec, remedy.changes)
        assert fixed != spec
        for path, value in expected.items():
            node: Any = fixed.model_dump(mode="json")
            for key in path.split("/"):
                node = node[key]
            assert node == value
    else:
        assert isinstance(remedy, expected), remedy


@pytest.mark.slow  # real processes / a real package build
def test_rules_give_up_when_their_fix_is_spent(captured: dict[str, str]) -> None:
    """A second occurrence after the fix must not loop: each rule says it has nothing more."""
    spent = {
        "missing_module": make_spec(**{"dependencies/einops": ""}),
        "transformers_removed_name": make_spec(transformers_requirement="transformers>=4.46,<5"),
        "transformers_too_old": make_spec(),
        "dtype_unsupported": make_spec(**{"dtype/target": "bfloat16", "dtype/fallback": "float32"}),
        "device_mismatch": make_spec(set_default_device=True),
        "missing_config_attribute": make_spec(**{"config_overrides/layer_norm_eps": 1e-12}),
        "sequence_too_long": make_spec(**{"inputs/seq_len": 8}),
    }
    for case, spec in spent.items():
        c = classify(failure_of(captured[case]))
        assert isinstance(c.rule.remedy(spec, c.match, FixContext(model_config={"n_positions": 16})), GiveUp), case


def test_remote_code_is_fixed_only_when_the_board_allows_it(captured: dict[str, str]) -> None:
    c = classify(failure_of(captured["remote_code"]))
    allowed = c.rule.remedy(make_spec(), c.match, FixContext(allow_remote_code=True))
    assert isinstance(allowed, Fix) and allowed.changes == {"trust_remote_code": True}
    blocked = c.rule.remedy(make_spec(), c.match, FixContext())
    assert isinstance(blocked, Block) and "allow" in blocked.reason


def test_gated_block_reason_depends_on_token(captured: dict[str, str]) -> None:
    c = classify(failure_of(captured["gated_repo"]))
    assert "HF_TOKEN" in c.rule.remedy(make_spec(), c.match, FixContext()).reason
    assert "no access" in c.rule.remedy(make_spec(), c.match, FixContext(has_hf_token=True)).reason


def test_out_of_memory_ladder(captured: dict[str, str]) -> None:
    """batch -> sequence -> dry-run depth -> give up, in that order."""
    c = classify(failure_of(captured["out_of_memory"]))
    ctx = FixContext(model_config={"num_hidden_layers": 4})
    spec = make_spec(**{"inputs/batch_size": 2, "inputs/seq_len": 16})
    seen = []
    for _ in range(6):
        remedy = c.rule.remedy(spec, c.match, ctx)
        if not isinstance(remedy, Fix):
            break
        seen.append(remedy.changes)
        spec = apply_changes(spec, remedy.changes)
    assert seen == [
        {"inputs/batch_size": 1},
        {"inputs/seq_len": 8},
        {"dry_run_max_layers": 2},
        {"dry_run_max_layers": 1},
    ]
    assert isinstance(remedy, GiveUp)


def test_unrelated_keyword_error_is_not_blamed_on_transformers(captured: dict[str, str]) -> None:
    assert classify(failure_of(captured["unrelated_unexpected_kwarg"])).rule_name == UNCLASSIFIED


def test_unrecognised_failure_is_unclassified_with_tail(captured: dict[str, str]) -> None:
    c = classify(failure_of(captured["unclassified"]))
    assert c.rule is None and c.rule_name == UNCLASSIFIED
    diagnosis = c.diagnosis()
    assert diagnosis["rule"] == UNCLASSIFIED
    assert "not a multiple of the number of attention heads" in diagnosis["error"]
    assert "Traceback" in diagnosis["log_tail"] or "ValueError" in diagnosis["log_tail"]


def test_dependency_resolution_on_a_real_uv_failure(tmp_path: Path) -> None:
    """uv really fails to resolve a pin that does not exist; the rule relaxes exactly that pin."""
    from ascendbridge.package import uv_env

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "resolve-me"\nversion = "0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["einops==999.0", "tqdm>=4"]\n'
    )
    res = uv_env.lock(tmp_path, timeout_s=120)
    assert not res.ok
    failure = Failure.from_command("lock", res)
    c = classify(failure)
    assert c.rule_name == "dependency_resolution", failure.output
    spec = make_spec(**{"dependencies/einops": "==999.0", "dependencies/tqdm": ">=4"})
    remedy = c.rule.remedy(spec, c.match, FixContext())
    assert isinstance(remedy, Fix) and remedy.changes == {"dependencies/einops": ""}


def test_timeout_on_a_real_hang() -> None:
    res = run_command(
        [sys.executable, "-c", "import time; print('loading', flush=True); time.sleep(60)"], timeout_s=1.0
    )
    failure = Failure.from_command("dry_run", res, timeout_s=1.0)
    c = classify(failure)
    assert c.rule_name == "timeout"
    remedy = c.rule.remedy(make_spec(**{"inputs/batch_size": 1, "inputs/seq_len": 32}), c.match, FixContext())
    assert isinstance(remedy, Fix) and remedy.changes == {"inputs/seq_len": 16}


def test_secrets_are_redacted_from_diagnoses(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    monkeypatch.setenv("HF_TOKEN", secret)
    code = (
        f"import os; print('Authorization: Bearer {secret}'); "
        "raise SystemExit('token=' + os.environ['HF_TOKEN'] + ' rejected')"
    )
    res = run_command([sys.executable, "-c", code], timeout_s=30)
    diagnosis = classify(Failure.from_command("real_run", res)).diagnosis()
    text = json.dumps(diagnosis)
    assert secret not in text and "[REDACTED]" in text
