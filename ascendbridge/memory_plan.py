"""The memory plan: before a timed stage loads anything, how its run fits this host's memory.

A stage that loads a model too large for the host is killed by the kernel's OOM killer after
minutes (or hours) of work, and a retry meets the same end. The plan predicts the run's peak from
discovery's parameter count with the bytes-per-parameter model below, compares it with the memory
the stage may fill (a safety fraction of the host's, and of a card's when the target runs on one),
and names how the stage runs, or why it cannot: a refusal with the figures and the remedy, on the
first attempt. A pure function of its inputs: the stages gather them (ascendbridge/workers/host_memory.py).

The bytes-per-parameter model (P: the parameters the run builds), and where each number comes from:

- accuracy (benchmark, optimization): the float32 CPU reference, 4 P (ab_runtime/harness.py
  load_reference); its float64 copy, 8 P while the float64 reference runs, when 8 P is within
  ab_runtime.memory.FP64_REFERENCE_MAX_BYTES; the target, `copy.deepcopy(reference).to(dtype)`
  (harness.place_target): a float32 copy on the host before the cast, 4 P, then the dtype's bytes on
  a card. "Reference beside target" peaks at the larger of 4 P + 8 P (float64 phase) and 4 P + 4 P
  (target copy); "stored reference" (reference outputs stored, then the target loaded alone) at the
  larger of 4 P + 8 P and 4 P. The optimization search holds a finished baseline beside the
  candidate it builds (one more target at the dtype's bytes).
- training: ab_runtime.memory.training_bytes (the harness's own estimate: weight, gradient and two
  AdamW moments per trained parameter, the weight alone per frozen one, x1.25) per trainer; the
  baseline contract (ab_runtime/train/run.py run_contract) holds three trainers at its peak (the
  CPU float32 reference, the target and the target reloaded from its checkpoint) plus two kept
  first-step gradient copies (4 bytes per trained parameter each); bf16 autocast adds its weight
  casts, 2 P. LoRA trains its adapters only: counted as 1 % of P (rank 8 on Qwen3-0.6B's shapes:
  0.2 % on peft's q / v projections, 0.85 % on every linear layer). Measured on Qwen3-0.6B (LoRA,
  bf16 autocast, 2026-12-07, issue 51): 7.7-8.3 GB resident with two trainers alive, 13-14 bytes a
  parameter; the model gives 2 x 5 + 2 = 12 bytes a parameter plus the process, and 17.5 at the
  contract's peak. docs/memory.md has the measurements through the real stages.
- every run: plus PROCESS_BYTES, the interpreter with torch and transformers imported; an accuracy
  run x MEMORY_MARGIN (ascendbridge/discovery/decisions.py: activations, KV cache and the allocator's
  own), a training run no more than training_bytes's own x1.25.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ab_runtime.memory import BF16_BYTES, FP32_BYTES, FP64_REFERENCE_MAX_BYTES, training_bytes
from ascendbridge.discovery.decisions import BYTES_PER_ELEMENT, MEMORY_MARGIN

GIB = 1024**3
# Resident memory of a model run's interpreter before it builds a model (torch and transformers
# imported); docs/memory.md gives the measurement.
PROCESS_BYTES = GIB // 2
FP64_BYTES = 8
LORA_TRAINED_SHARE = 0.01
CONTRACT_TRAINERS = 3
KEPT_GRADIENTS = 2
HARNESS_HEADROOM = 1.0  # training_bytes carries the harness's own x1.25 for activations: no second margin

PlanName = Literal["reference beside target", "stored reference", "training contract", "refused"]
REFUSED_RULE = "memory_plan_refused"


@dataclass(frozen=True)
class Room:
    """The memory a plan may fill: `fraction` of the host's total, at most what is available now,
    and `fraction` of one card's when the target runs on one (`card_total` None on a CPU)."""

    host_available: int
    host_total: int
    fraction: float
    source: str  # how the host's figure was found: "/proc/meminfo" or the override's name
    card_total: int | None = None

    def budget(self, where: str) -> int:
        if where == "card":
            return int(self.fraction * (self.card_total or 0))
        return min(self.host_available, int(self.fraction * self.host_total))


@dataclass(frozen=True)
class MemoryPlan:
    """A stage's plan: its name, the peak it predicts against what it may fill, per pool, and why."""

    stage: str
    name: PlanName
    parameters: int  # the parameters the run builds
    needs: dict[str, int]  # pool ("host", "card") -> predicted peak bytes
    budgets: dict[str, int]  # pool -> bytes the plan may fill
    why: str
    parts: dict[str, int] = field(default_factory=dict)  # the model's terms, bytes
    remedy: str = ""

    @property
    def fits(self) -> bool:
        return self.name != "refused"

    @property
    def binding(self) -> str:
        """The pool with the least room left: the one the headline names."""
        return min(self.needs, key=lambda pool: self.budgets[pool] - self.needs[pool])

    def line(self) -> str:
        """`memory plan: reference beside target (needs 3.1 GiB of 19.8 GiB available)`."""
        pool = self.binding
        where = "" if pool == "host" else f" on the {pool}"
        return f"memory plan: {self.name} (needs {gib(self.needs[pool])} of {gib(self.budgets[pool])} available{where})"

    def evidence(self) -> dict[str, object]:
        """What the stage's result records."""
        return {
            "plan": self.name,
            "parameters": self.parameters,
            "needs_bytes": self.needs,
            "budget_bytes": self.budgets,
            "why": self.why,
            "parts_bytes": self.parts,
        }

    def diagnosis(self) -> dict[str, object]:
        """A refused plan's diagnosis: not retryable, the figures in its one line, the remedy."""
        return {
            "rule": REFUSED_RULE,
            "summary": f"{self.line()}: {self.why}",
            "memory_plan": self.evidence(),
            "retryable": False,
            "remedy": self.remedy,
        }


def gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def _peak(model_bytes: float, margin: float = MEMORY_MARGIN) -> int:
    return int(model_bytes * margin + PROCESS_BYTES)


def _fp64_bytes(parameters: int) -> int:
    copy = FP64_BYTES * parameters
    return copy if copy <= FP64_REFERENCE_MAX_BYTES else 0


def accuracy_remedy(stage: str) -> str:
    """What unlocks a refused benchmark-like plan: more memory, a card, or a proxy of the same architecture."""
    return (
        "a host with more memory (or, where this one has more to give, a larger ASCENDBRIDGE_HOST_MEMORY_BYTES / "
        "ASCENDBRIDGE_MEMORY_FRACTION), the target on an accelerator (`--devices`), or a depth-reduced, "
        f"config-initialised proxy of the same architecture (`--set {stage}.real_weights=false`; "
        f"ASCENDBRIDGE_DRY_RUN_MAX_GB bounds it), then `board_ops.py retry MODEL --stage {stage}`; or a "
        "registered reduced-depth proxy for every stage (`board_ops.py set_depth MODEL N`, then "
        "`board_ops.py rollback MODEL --to discovery`)"
    )


def accuracy_plan(
    stage: str, parameters: int, dtypes: list[str], room: Room, can_store_reference: bool, targets: int = 1
) -> MemoryPlan:
    """Benchmark / optimization: the float32 reference beside the target when it fits; else the
    reference computed once and stored, when the stage `can_store_reference` and it fits; else refused.
    `targets`: target builds alive at once (the optimization search times a baseline and a candidate
    paired, ab_runtime/optimize/optimize.py), the last one still its float32 copy."""
    reference, fp64 = FP32_BYTES * parameters, _fp64_bytes(parameters)
    copy = FP32_BYTES * parameters
    built = int(max(BYTES_PER_ELEMENT.get(d, FP32_BYTES) for d in dtypes) * parameters)  # one finished target
    on_card = room.card_total is not None
    others = 0 if on_card else (targets - 1) * built  # finished targets beside the copy, on the host
    parts = {"reference_fp32": reference, "reference_fp64": fp64, "target_copy": copy, "other_targets": others}
    beside = {"host": _peak(max(reference + fp64, reference + others + copy))}
    stored = {"host": _peak(max(reference + fp64, others + copy))}
    if on_card:
        parts["targets_on_card"] = targets * built
        beside["card"] = stored["card"] = _peak(targets * built)
    budgets = {pool: room.budget(pool) for pool in beside}

    def fits(needs: dict[str, int]) -> bool:
        return all(needs[pool] <= budgets[pool] for pool in needs)

    if fits(beside):
        why = f"the float32 reference fits beside the target within {room.fraction:.0%} of {room.source}"
        return MemoryPlan(stage, "reference beside target", parameters, beside, budgets, why, parts)
    if fits(stored) and can_store_reference:
        why = f"the reference beside the target would need {gib(beside['host'])}: reference outputs stored, then the target alone"
        return MemoryPlan(stage, "stored reference", parameters, stored, budgets, why, parts)
    if fits(stored):
        why = (
            f"the reference beside the target needs {gib(beside['host'])}; a stored reference would need "
            f"{gib(stored['host'])}, which fits, but this stage cannot store its reference yet"
        )
    else:
        why = f"even a stored reference needs {gib(stored['host'])} (the reference beside the target {gib(beside['host'])})"
    return MemoryPlan(stage, "refused", parameters, beside, budgets, why, parts, accuracy_remedy(stage))


def training_plan(
    stage: str, parameters: int, method: str, precision: str, processes: int, room: Room, remedy: str
) -> MemoryPlan:
    """Training: the baseline contract's three trainers, and the run's one trainer per process (DDP
    replicates the model; FSDP2 would shard it, so this over-counts it), within the room, else
    refused. On cards the contract's reference trainer stays on the host, the target's two and
    each rank's one on its card."""
    trained = parameters if method == "full" else int(parameters * LORA_TRAINED_SHARE)
    state = training_bytes(trained, parameters - trained)
    casts = BF16_BYTES * parameters if precision == "bf16-autocast" else 0
    gradients = KEPT_GRADIENTS * FP32_BYTES * trained
    parts = {"trainer_state": state, "autocast_casts": casts, "kept_gradients": gradients}
    if room.card_total is None:
        contract = _peak(CONTRACT_TRAINERS * state + casts + gradients, HARNESS_HEADROOM)
        needs = {"host": max(contract, processes * _peak(state + casts, HARNESS_HEADROOM))}  # a rank: a process
    else:
        needs = {
            "host": _peak(state + gradients // 2, HARNESS_HEADROOM),
            "card": _peak(2 * state + casts + gradients // 2, HARNESS_HEADROOM),
        }
    budgets = {pool: room.budget(pool) for pool in needs}
    held = f"the baseline contract's {CONTRACT_TRAINERS} {method} training states of {gib(state)} each"
    if processes > 1 and room.card_total is None:
        held += f", then {processes} processes of one each"
    if all(needs[pool] <= budgets[pool] for pool in needs):
        why = f"{held} fit within {room.fraction:.0%} of {room.source}"
        return MemoryPlan(stage, "training contract", parameters, needs, budgets, why, parts)
    return MemoryPlan(stage, "refused", parameters, needs, budgets, f"{held} do not fit", parts, remedy)
