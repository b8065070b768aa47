"""The search's budget (ab_runtime/optimize/quick.py `outranked`): a pass its group's kept, costly pass
already outranks is never built, and the search's verdict is the one measuring it gives.

Real searches on the strict tiny Llama (bf16 misses the tightened budget, so the CPU bf16 passes
are rejected on accuracy on any machine) with passes of known cost in the exclusive group
`precision`, each built as slowly as a compile (tests/optimization/inner/known_cost_passes.py):
- good: test_slow_cached (a certain gain) is kept, so cpu_bf16_cast and cpu_bf16_autocast (expected
  x0.8 and x0.7) are listed as outranked and never built; `--measure-all` builds them and rejects them on accuracy;
  both choose test_slow_cached and the fresh confirmation keeps it;
- broken: test_slow_twice (a certain loss) is not kept, so it outranks nothing: the bf16 passes are
  built and measured, and nothing is chosen, as before the budget.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.optimize.quick import COSTLY_BUILD_S
from optimization.notes_check import check_notes
from tests.optimization.conftest import KNOWN_COST, NATIVE, SEARCH_PROCESS_TIMEOUT_S, STRICT, notes_of
from tests.optimization.opt_support import demo_config, make_adaptation, run_py

BF16 = "cpu_bf16_cast,cpu_bf16_autocast"
SEARCHES = {
    "good": ("test_slow_cached," + BF16,),
    "good_all": ("test_slow_cached," + BF16, "--measure-all"),
    "broken": ("test_slow_twice," + BF16,),
}


@pytest.fixture(scope="module")
def budgeted(python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], str]]:
    """Each search's notes and output, run concurrently, each in a strict tiny Llama of its own."""
    root = tmp_path_factory.mktemp("budget")
    env = {**NATIVE, "AB_RUNTIME_EXTRA_PASSES": str(KNOWN_COST)}

    def search(name: str, passes: str, *extra: str) -> tuple[dict[str, Any], str]:
        directory = make_adaptation(
            root / name, "strict-llama", demo_config("tiny-llama"), "causal_lm", "LlamaForCausalLM", python
        )
        spec = json.loads((directory / "adaptation.json").read_text())
        (directory / "adaptation.json").write_text(json.dumps({**spec, "tolerances": STRICT}, indent=2))
        argv = ["-m", "ab_runtime.optimize", "--passes", passes, "--iters", "2", "--num-samples", "1", *extra]
        code, result, output = run_py(python, directory, *argv, env=env, timeout=SEARCH_PROCESS_TIMEOUT_S)
        assert code == 0 and result["ok"], output[-3000:]
        return notes_of(directory), output

    with ThreadPoolExecutor(max_workers=len(SEARCHES)) as pool:
        futures = {name: pool.submit(search, name, *args) for name, args in SEARCHES.items()}
    return {name: future.result() for name, future in futures.items()}


pytestmark = pytest.mark.timeout(SEARCH_PROCESS_TIMEOUT_S + 120)


def rows(notes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in notes["passes"]}


def test_a_pass_its_kept_group_mate_outranks_is_never_built(budgeted: dict) -> None:
    notes, output = budgeted["good"]
    kept = rows(notes)["test_slow_cached"]
    assert kept["kept"] and kept["cold_start"]["build_s"] >= COSTLY_BUILD_S, kept
    for name in ("cpu_bf16_cast", "cpu_bf16_autocast"):
        row = rows(notes)[name]
        assert row["applicable"] and not row["measured"] and not row["kept"], row
        assert row["outranked_by"] == "test_slow_cached" and row["reason"].startswith("not built:"), row
        assert "paired" not in row and "cold_start" not in row and "accuracy" not in row  # nothing built or timed
        assert f"pass {name}: rejected - not built:" in output
    assert notes["settings"]["measure_all"] is False
    assert check_notes(notes) == []  # the notes gate re-derives the rule from the rows before


def test_the_budget_changes_no_verdict(budgeted: dict) -> None:
    """The same choice and final outcome as measuring every pass; there the bf16 passes were built
    and rejected (on accuracy: the strict budget), which is what the budget saved."""
    notes, _ = budgeted["good"]
    everything, _ = budgeted["good_all"]
    assert notes["chosen"] == everything["chosen"] == ["test_slow_cached"]
    assert notes["final"]["outcome"] == everything["final"]["outcome"] == "gain"
    for name in ("cpu_bf16_cast", "cpu_bf16_autocast"):  # built, and rejected on accuracy
        row = rows(everything)[name]
        assert "cold_start" in row and row["accuracy"]["verdict"] == "fail" and not row["kept"], row
        assert "outranked_by" not in row
    assert everything["settings"]["measure_all"] is True and check_notes(everything) == []


def test_a_costly_pass_that_loses_outranks_nothing(budgeted: dict) -> None:
    notes, _ = budgeted["broken"]
    assert not rows(notes)["test_slow_twice"]["kept"]
    for name in ("cpu_bf16_cast", "cpu_bf16_autocast"):  # built, and rejected on accuracy
        row = rows(notes)[name]
        assert "cold_start" in row and row["accuracy"]["verdict"] == "fail" and not row["kept"], row
        assert "outranked_by" not in row
    assert notes["chosen"] == [] and notes["final"]["outcome"] == "no_gain"
    assert check_notes(notes) == []


def test_a_forged_outranking_fails_the_notes_gate(budgeted: dict) -> None:
    notes, _ = budgeted["good"]
    cheap = json.loads(json.dumps(notes))  # the kept pass built in no time: nothing is outranked
    cheap["passes"][0]["cold_start"]["build_s"] = 0.01
    assert any("no kept pass before it outranks it" in p for p in check_notes(cheap))
    every = json.loads(json.dumps(notes))
    every["settings"]["measure_all"] = True
    assert any("although settings.measure_all is set" in p for p in check_notes(every))
