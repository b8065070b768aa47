"""Gate helper: re-run sample 0 of a benchmark run and check the saved tensors are real.

Uses the FRAMEWORK's copy of the adaptation runtime (put first on sys.path), never the
adaptation's: rebuild the model the same seeded way accuracy_run.py does, rebuild sample 0's
inputs, and require (1) the saved inputs to be exactly those, (2) the saved CPU float32
reference to match a fresh reference forward, (3) the saved target outputs to match a fresh
forward on the same device and dtype. On CPU, runs are reproducible, so (3) is tight; on
accelerators it allows twice the dtype's rounding step. A device that is not present here
(NPU evidence checked on a CPU machine) is reported as a note, not a pass or a failure.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from _framework import RUNTIME_DIR

DTYPE_STEP = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
REFERENCE_TOLERANCE = 1e-5  # max |fresh - saved| / max |saved| for the CPU float32 reference


def _runtime() -> Any:
    if str(RUNTIME_DIR.parent) not in sys.path[:1]:
        sys.path.insert(0, str(RUNTIME_DIR.parent))
    import ab_runtime

    if Path(ab_runtime.__file__).resolve().parent != RUNTIME_DIR.resolve():
        raise RuntimeError(f"ab_runtime resolved to {ab_runtime.__file__}, not the framework's copy")
    return ab_runtime


def _mismatch(name: str, fresh: dict[str, Any], saved: dict[str, Any], tolerance: float) -> list[str]:
    import torch

    problems = []
    if set(fresh) != set(saved):
        return [f"{name}: re-run outputs {sorted(fresh)} != saved {sorted(saved)}"]
    for key, value in fresh.items():
        old = saved[key]
        if tuple(value.shape) != tuple(old.shape):
            problems.append(f"{name}.{key}: re-run shape {list(value.shape)} != saved {list(old.shape)}")
            continue
        a, b = value.to(torch.float64), old.to(torch.float64)
        if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
            problems.append(f"{name}.{key}: nan/inf pattern differs from a re-run")
            continue
        finite = torch.isfinite(b)
        scale = float(b[finite].abs().max()) if bool(finite.any()) else 0.0
        err = float((a[finite] - b[finite]).abs().max()) if bool(finite.any()) else 0.0
        if err > tolerance * max(scale, 1e-12):
            problems.append(f"{name}.{key}: saved values differ from a re-run by {err:.3e} "
                            f"(allowed {tolerance:.1e} x scale {scale:.3e})")
    return problems


def reexecute(spec_path: Path, run: dict[str, Any], saved: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, notes) from re-running sample 0 of one run."""
    import torch

    _runtime()
    from ab_runtime import device as ab_device
    from ab_runtime import families, loading
    from ab_runtime.errors import RuntimeDiagnosis
    from ab_runtime.inputs import forward_flags
    from ab_runtime.spec import load_spec

    spec = load_spec(spec_path)
    try:
        choice = ab_device.select_device(str(run.get("device")), allow_fallback=False)
    except RuntimeDiagnosis:
        return [], [f"re-execution skipped: device {run.get('device')} is not available here"]
    dtype_name = str(run.get("dtype"))
    dtype = getattr(torch, dtype_name)
    cpu = choice if choice.kind == "cpu" else ab_device.select_device("cpu")
    torch.manual_seed(spec.recipe.seed)
    loaded = loading.load_model(spec, dry_run=run.get("mode") != "pretrained", device=cpu, dtype=torch.float32)
    model = loaded.model.eval()
    family = families.get_family(spec.task_family)
    inputs = family.build_inputs(model, loaded.config, spec.recipe, spec.recipe.seed)
    problems = [f"saved input '{k}' is not the seeded input the run must have used"
                for k, v in saved["inputs"].items() if k not in inputs or not torch.equal(inputs[k], v)]
    flags = forward_flags(model)
    pooling = spec.sentence_transformers_pooling

    def forward(net: Any, device: str, dt: Any) -> dict[str, Any]:
        moved = {k: v.to(device=device, dtype=dt if v.is_floating_point() else v.dtype) for k, v in inputs.items()}
        with torch.inference_mode():
            named = family.named_outputs(net(**moved, **flags), moved, pooling, spec.sentence_transformers_normalize)
        return {k: v.detach().to("cpu") for k, v in named.items()}

    first = {k: v[0] for k, v in saved["reference"].items()}
    problems += _mismatch("reference", forward(model, "cpu", torch.float32), first, REFERENCE_TOLERANCE)
    target = copy.deepcopy(model).to(device=choice.torch_device, dtype=dtype)
    tolerance = REFERENCE_TOLERANCE if choice.kind == "cpu" else 2 * DTYPE_STEP.get(dtype_name, 2.0**-7)
    problems += _mismatch("target", forward(target, choice.torch_device, dtype),
                          {k: v[0] for k, v in saved["target"].items()}, tolerance)
    return problems, [f"re-executed sample 0 on {choice.kind} ({choice.name})"]
