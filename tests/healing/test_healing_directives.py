"""Directives the healer cannot act on end its run with one line and leave the spec untouched; the
one it can (the benchmark's dtype island) runs end to end in tests/benchmark/test_benchmark_stage.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.package.spec import AdaptationSpec, ModelSource
from healing.directives import apply_directives
from healing.rules import FixContext


@pytest.mark.parametrize(
    "directive, error",
    [
        ({"rule": "no_such_rule", "from_stage": "benchmark", "finding": {}}, "unknown healing rule 'no_such_rule'"),
        (
            {
                "rule": "dtype_unsupported",
                "from_stage": "benchmark",
                "summary": "vague",
                "finding": {"dtype": "bfloat16"},
            },
            "directive dtype_unsupported (vague): the rule proposes no fix",
        ),
    ],
)
def test_a_directive_without_a_fix_is_one_line_and_changes_nothing(tmp_path: Path, directive: dict, error: str) -> None:
    spec = AdaptationSpec(
        name="tiny",
        model=ModelSource(model_id="org/tiny", source="local", path="/nonexistent"),
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
        dtype={"target": "bfloat16"},
    )
    spec.save(tmp_path)
    before = (tmp_path / "adaptation.json").read_bytes()
    said: list[str] = []
    applied, broken = apply_directives(tmp_path, [directive], FixContext(), said.append)
    assert applied == [] and broken is not None and error in broken
    assert (tmp_path / "adaptation.json").read_bytes() == before and said == []


def test_no_directive_is_no_change(tmp_path: Path) -> None:
    AdaptationSpec(
        name="tiny",
        model=ModelSource(model_id="org/tiny", source="local", path="/nonexistent"),
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
    ).save(tmp_path)
    before = (tmp_path / "adaptation.json").read_bytes()
    assert apply_directives(tmp_path, [], FixContext(), print) == ([], None)
    assert (tmp_path / "adaptation.json").read_bytes() == before
