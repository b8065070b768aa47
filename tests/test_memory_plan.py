"""The memory plan chooses each branch from the figures alone (synthetic rooms and sizes, no model)."""

from __future__ import annotations

import pytest

from ascendbridge.memory_plan import GIB, REFUSED_RULE, Room, accuracy_plan, accuracy_remedy, training_plan
from ascendbridge.refusals import is_refusal
from ascendbridge.workers.host_memory import OVERRIDE, built_parameters, room

M = 10**6


def host(gib: float, fraction: float = 0.8) -> Room:
    size = int(gib * GIB)
    return Room(size, size, fraction, "a test host")


def test_a_model_that_fits_runs_its_reference_beside_the_target() -> None:
    plan = accuracy_plan("benchmark", 100 * M, ["float32", "bfloat16"], host(24), True)
    assert plan.name == "reference beside target" and plan.fits
    assert plan.needs["host"] <= plan.budgets["host"] == int(0.8 * 24 * GIB)
    assert plan.line().startswith("memory plan: reference beside target (needs ")
    assert plan.line().endswith(f"of {0.8 * 24:.1f} GiB available)")


def test_the_budget_is_the_fraction_of_the_host_and_never_more_than_is_available() -> None:
    busy = Room(2 * GIB, 24 * GIB, 0.8, "a busy host")
    assert busy.budget("host") == 2 * GIB
    assert host(24, fraction=0.5).budget("host") == 12 * GIB


def test_as_the_host_grows_the_plan_goes_refused_then_stored_then_beside() -> None:
    parameters = 2000 * M  # above the float64 reference's size: a stored reference lowers the peak
    sizes = [quarter / 4 for quarter in range(4, 4 * 64)]
    names = [accuracy_plan("benchmark", parameters, ["bfloat16"], host(s), True).name for s in sizes]
    order = list(dict.fromkeys(names))
    assert order == ["refused", "stored reference", "reference beside target"]
    stored = sizes[names.index("stored reference")]
    plan = accuracy_plan("benchmark", parameters, ["bfloat16"], host(stored), True)
    beside = accuracy_plan("benchmark", parameters, ["bfloat16"], host(1024), True)
    assert plan.fits and plan.needs["host"] <= plan.budgets["host"] < beside.needs["host"]


def test_a_stage_that_cannot_store_its_reference_refuses_where_only_that_would_fit() -> None:
    parameters = 2000 * M
    sizes = [quarter / 4 for quarter in range(4, 4 * 64)]
    stored = next(s for s in sizes if accuracy_plan("benchmark", parameters, ["bfloat16"], host(s), True).fits)
    refused = accuracy_plan("benchmark", parameters, ["bfloat16"], host(stored), False)
    assert refused.name == "refused" and not refused.fits and refused.remedy == accuracy_remedy("benchmark")
    assert "a stored reference would need" in refused.why and "cannot store its reference" in refused.why


def test_a_model_too_large_for_any_plan_is_refused_with_the_figures_and_the_remedy() -> None:
    plan = accuracy_plan("benchmark", 7000 * M, ["bfloat16"], host(24), True)
    assert plan.name == "refused"
    diagnosis = plan.diagnosis()
    assert (
        diagnosis["rule"] == REFUSED_RULE
        and is_refusal(diagnosis)
        and diagnosis["remedy"] == accuracy_remedy("benchmark")
    )
    summary = str(diagnosis["summary"])
    assert f"needs {plan.needs['host'] / GIB:.1f} GiB of {0.8 * 24:.1f} GiB available" in summary
    assert "\n" not in summary


def test_a_target_on_a_card_is_planned_against_the_card_too() -> None:
    size = 64 * GIB
    room = Room(size, size, 0.8, "a test host", card_total=2 * GIB)
    plan = accuracy_plan("benchmark", 1000 * M, ["bfloat16"], room, True)
    assert plan.name == "refused" and plan.binding == "card"
    assert "on the card" in plan.line()
    assert plan.needs["card"] > plan.budgets["card"] == int(0.8 * 2 * GIB)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_training_fits_or_is_refused_from_the_contracts_three_states(method: str) -> None:
    parameters = 600 * M
    fits = training_plan("training", parameters, method, "bf16-autocast", 1, host(1024), "remedy")
    assert fits.name == "training contract" and fits.fits
    per_state = fits.parts["trainer_state"]
    assert fits.needs["host"] > 3 * per_state  # the reference, the target and the reloaded target
    refused = training_plan(
        "training", parameters, method, "bf16-autocast", 1, host(fits.needs["host"] / GIB / 0.8 * 0.9), "remedy"
    )
    assert refused.name == "refused" and f"3 {method} training states" in refused.why


def test_a_full_job_needs_more_than_a_lora_job_of_the_same_model() -> None:
    full = training_plan("training", 600 * M, "full", "fp32", 1, host(1024), "remedy")
    lora = training_plan("training", 600 * M, "lora", "fp32", 1, host(1024), "remedy")
    assert full.needs["host"] > 3 * lora.needs["host"] / 2


def test_the_optimization_search_plans_its_baseline_beside_the_candidate() -> None:
    # above the float64 reference's size, so the targets, not the float64 phase, set the peak
    one = accuracy_plan("optimization", 1000 * M, ["float32"], host(1024), False)
    two = accuracy_plan("optimization", 1000 * M, ["float32"], host(1024), False, targets=2)
    assert two.parts["other_targets"] > 0 == one.parts["other_targets"]
    assert two.needs["host"] > one.needs["host"]
    assert "optimization.real_weights=false" in accuracy_remedy("optimization")


def test_a_job_of_many_processes_on_a_cpu_holds_a_training_state_each() -> None:
    one = training_plan("training", 600 * M, "full", "fp32", 1, host(1024), "remedy")
    eight = training_plan("training", 600 * M, "full", "fp32", 8, host(1024), "remedy")
    assert eight.needs["host"] > one.needs["host"] and "then 8 processes of one each" in eight.why


def test_the_room_is_the_override_when_set_else_this_hosts_meminfo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_HOST_MEMORY_BYTES", str(3 * GIB))
    monkeypatch.setenv("ASCENDBRIDGE_MEMORY_FRACTION", "0.5")
    forced = room("cpu")
    assert forced is not None and forced.source == OVERRIDE and forced.budget("host") == int(1.5 * GIB)
    monkeypatch.delenv("ASCENDBRIDGE_HOST_MEMORY_BYTES")
    here = room("cpu")
    assert here is not None and here.source == "/proc/meminfo" and here.card_total is None
    assert 0 < here.budget("host") <= here.host_available


def test_a_dry_run_is_planned_at_its_proxys_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_DRY_RUN_MAX_GB", "1")
    assert built_parameters(7000 * M, pretrained=True) == 7000 * M
    assert built_parameters(7000 * M, pretrained=False) == GIB // 4  # a float32 proxy within 1 GiB
    assert built_parameters(10 * M, pretrained=False) == 10 * M
