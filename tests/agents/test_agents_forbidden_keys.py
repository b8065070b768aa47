"""A healer agent's proposal that touches the accuracy thresholds is refused, with the reason.

The check runs on a real workspace copy with the proposed adaptation.json; the refusal comes
before anything is rendered or run, so no environment is needed.
"""

from __future__ import annotations

from pathlib import Path

from ascendbridge.config import REPO_ROOT
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec, InputRecipe, ModelSource, forbidden_change
from healing.agent_escalation import _check_proposal
from healing.settings import HealingSettings


def test_healer_proposal_changing_tolerances_is_refused_with_a_reason(tmp_path: Path) -> None:
    spec = AdaptationSpec(
        name="tiny-gpt2",
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
        model=ModelSource(
            model_id="demo/tiny-gpt2",
            source="local",
            path=str(REPO_ROOT / "demo_models" / "tiny-gpt2"),
            has_weights=False,
        ),
    )
    copy = tmp_path / spec.name
    copy.mkdir()
    # A plausible-looking fix (a smaller batch) that also loosens the bf16 cosine floor.
    spec.model_copy(update={"inputs": InputRecipe(batch_size=1), "tolerances": {"bfloat16": {"cosine_min": 0.5}}}).save(
        copy
    )
    verdict = _check_proposal(spec, HealingSettings(), copy, [SPEC_FILE])
    assert verdict.passed is False
    assert "changed tolerances" in verdict.summary and "framework's standard" in verdict.summary
    # The same edit without the thresholds is not refused for that reason.
    assert forbidden_change({"inputs/batch_size": 1}, "healer") is None
