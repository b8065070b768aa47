"""Device selection: npu -> cuda -> cpu, never a silent fallback.

There is no NPU here, so the NPU side is checked with FakeTorchNpu: a stand-in `torch_npu`
package (written to a temp dir and put on PYTHONPATH) that registers `torch.npu` the way the
real one does, reporting available / unavailable, or failing to import like a broken CANN
install. No NPU result is ever claimed from it: it only drives the selection logic.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.rt_support import RUNTIME_PARENT, make_adaptation, parse_result, run_demo, run_probe, spec_for

FAKE_TORCH_NPU = '''"""FakeTorchNpu: a test double for Huawei's torch_npu, which cannot exist on this machine."""
import types
import torch

AVAILABLE = {available}
__version__ = "2.7.1.post2+FakeTorchNpu"
calls = []


def _record(name, result=None):
    def call(*args, **kwargs):
        calls.append(name)
        return result
    return call


torch.npu = types.SimpleNamespace(
    is_available=lambda: AVAILABLE,
    device_count=lambda: 1 if AVAILABLE else 0,
    set_device=_record("set_device"),
    get_device_name=lambda index=0: "Ascend910B (FakeTorchNpu)",
    synchronize=_record("synchronize"),
    max_memory_allocated=_record("max_memory_allocated", 4096),
    reset_peak_memory_stats=_record("reset_peak_memory_stats"),
    empty_cache=_record("empty_cache"),
    get_device_properties=lambda index=0: types.SimpleNamespace(total_memory=64 * 1024**3),
)
'''
BROKEN_TORCH_NPU = 'raise OSError("libascendcl.so: cannot open shared object file (FakeTorchNpu)")\n'

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ab_runtime.device import select_device, synchronize, peak_memory, reset_peak_memory, empty_cache
from ab_runtime.errors import DeviceUnavailable
out = {}
for label, requested, fallback in [("auto", "auto", False), ("npu", "npu", False), ("npu_fb", "npu", True),
                                   ("cuda", "cuda", False), ("cpu", "cpu", False)]:
    try:
        choice = select_device(requested, allow_fallback=fallback)
        out[label] = choice.as_dict()
        if choice.kind == "npu":
            reset_peak_memory(choice); synchronize(choice); empty_cache(choice)
            out[label]["peak"] = peak_memory(choice)
            import torch_npu
            out[label]["calls"] = list(torch_npu.calls)
    except DeviceUnavailable as exc:
        out[label] = {"error": str(exc)}
print(json.dumps(out))
"""


def _probe(python: Path, fake_dir: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if fake_dir is not None:
        env["PYTHONPATH"] = str(fake_dir)
    proc = subprocess.run(
        [str(python), "-c", PROBE, str(RUNTIME_PARENT)], capture_output=True, text=True, timeout=180, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _fake(tmp_path: Path, source: str) -> Path:
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(source)
    return tmp_path


def test_without_torch_npu_only_an_explicit_fallback_leaves_the_requested_device(torch_python: Path) -> None:
    out = _probe(torch_python, None)
    assert out["auto"]["kind"] == "cpu" and out["auto"]["fallback"] is False
    assert any("torch_npu is not installed" in s for s in out["auto"]["skipped"])
    assert "device 'npu' requested but not available" in out["npu"]["error"]
    assert "--allow-fallback" in out["npu"]["error"]
    assert "device 'cuda' requested" in out["cuda"]["error"]
    assert out["npu_fb"]["kind"] == "cpu" and out["npu_fb"]["fallback"] is True
    assert "npu: torch_npu is not installed" in out["npu_fb"]["fallback_reason"]
    assert "cuda: torch.cuda.is_available() is False" in out["npu_fb"]["fallback_reason"]
    assert out["cpu"]["kind"] == "cpu" and out["cpu"]["torch_npu_version"] is None


def test_fake_available_npu_is_preferred_and_driven_through_torch_npu_api(torch_python: Path, tmp_path: Path) -> None:
    out = _probe(torch_python, _fake(tmp_path, FAKE_TORCH_NPU.format(available=True)))
    for label in ("auto", "npu", "npu_fb"):
        choice = out[label]
        assert (choice["kind"], choice["torch_device"], choice["fallback"]) == ("npu", "npu:0", False)
        assert choice["name"] == "Ascend910B (FakeTorchNpu)"
        assert choice["torch_npu_version"] == "2.7.1.post2+FakeTorchNpu"
    assert out["auto"]["peak"] == 4096
    assert out["auto"]["calls"] == [
        "set_device",
        "reset_peak_memory_stats",
        "synchronize",
        "empty_cache",
        "max_memory_allocated",
    ]
    assert out["cpu"]["kind"] == "cpu"  # an explicit cpu request is honoured even with an NPU present


def test_fake_unavailable_npu_is_reported_not_silently_replaced(torch_python: Path, tmp_path: Path) -> None:
    out = _probe(torch_python, _fake(tmp_path, FAKE_TORCH_NPU.format(available=False)))
    assert "torch.npu.is_available() is False" in out["npu"]["error"]
    assert out["npu_fb"]["fallback"] is True and "is_available() is False" in out["npu_fb"]["fallback_reason"]
    assert out["npu_fb"]["torch_npu_version"] == "2.7.1.post2+FakeTorchNpu"
    assert out["auto"]["kind"] == "cpu"


def test_torch_npu_that_fails_to_import_is_a_diagnosis(torch_python: Path, tmp_path: Path) -> None:
    out = _probe(torch_python, _fake(tmp_path, BROKEN_TORCH_NPU))
    assert "torch_npu failed to import: OSError: libascendcl.so" in out["npu"]["error"]
    assert out["auto"]["kind"] == "cpu"


SHARD_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch, transformers
from ab_runtime import sharding
from ab_runtime.device import DeviceChoice, accelerator_indices
from ab_runtime.errors import DeviceUnavailable
config = transformers.AutoConfig.from_pretrained(sys.argv[2])
config.num_hidden_layers = 16
with sharding.empty_weights():
    skeleton = transformers.AutoModelForCausalLM.from_config(config)
out = {}
npu = DeviceChoice("npu", "npu", "npu:4", "FakeTorchNpu", False, None, None)
os.environ["ASCENDBRIDGE_NPU_INDEX"] = "4,5"  # a profiled job: physical cards, no mask
for n, kind, visible in ((2, "npu", accelerator_indices(npu)), (8, "cuda", tuple(range(8)))):
    shard = sharding.shard_plan({"devices": n, "strategy": "device_map", "per_device_gb": 64}, kind, visible)
    out[str(n)] = {"devices": shard.devices, "first": shard.first_device, "max_memory": shard.max_memory(),
                   "map": sharding.build_device_map(skeleton, shard, torch.bfloat16)}
out["one"] = sharding.shard_plan({"devices": 1}, "cuda", (0, 1))
out["cpu"] = sharding.shard_plan({"devices": 8, "per_device_gb": 64}, "cpu", ())
for label, plan, kind, visible in (("too_few", {"devices": 8}, "cuda", (0, 1)),
                                   ("too_small", {"devices": 2, "per_device_gb": 0.0001}, "npu", (0, 1))):
    try:
        shard = sharding.shard_plan(plan, kind, visible)
        sharding.build_device_map(skeleton, shard, torch.bfloat16)
    except DeviceUnavailable as exc:
        out[label] = str(exc)
print(json.dumps(out))
"""


def test_a_plan_over_n_devices_builds_a_balanced_device_map_over_the_claimed_cards(
    torch_python: Path, tiny_models: dict
) -> None:
    """The map sharding would load with, for fake 2-card (ASCENDBRIDGE_NPU_INDEX=4,5) and 8-card
    plans on a 16-layer skeleton (meta device: nothing allocated, no accelerator needed)."""
    out = run_probe(torch_python, SHARD_PROBE, tiny_models["llama"]["path"])
    layers = [f"model.layers.{i}" for i in range(16)]
    for n, kind, cards in (("2", "npu", [4, 5]), ("8", "cuda", list(range(8)))):
        plan, devices = out[n], [f"{kind}:{i}" for i in cards]
        assert plan["devices"] == devices and plan["first"] == devices[0]
        assert plan["max_memory"] == {str(i): "64GiB" for i in cards}
        placed = plan["map"]
        assert placed["model.embed_tokens"] == devices[0]  # the inputs' card holds the first module
        assert all(layer in placed for layer in layers)  # a decoder layer (_no_split_modules) is never split
        assert set(placed.values()) <= set(devices) and len(set(placed.values())) > len(devices) // 2
        order = [devices.index(placed[name]) for name in placed]
        assert order == sorted(order)  # the cards are filled in module order, no hop back
    assert out["one"] is None and out["cpu"] is None  # one device, or a CPU run: loaded as a whole, as today
    assert "shards it over 8 cuda devices but this job sees 2 (cuda: 0,1)" in out["too_few"]
    assert "does not fit 2 x 0.0001 GiB npu devices" in out["too_small"]


@pytest.fixture(scope="module")
def adaptation(tiny_models: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny-llama with a two-device plan from discovery: on CPU it loads whole, as without one."""
    plan = {"devices": 2, "strategy": "device_map", "per_device_gb": 64, "tensor_parallel_degree": 2}
    return make_adaptation(
        tmp_path_factory.mktemp("adapt") / "tiny-llama", spec_for(tiny_models["llama"], device_plan=plan)
    )


def test_demo_py_with_npu_requested_on_cpu_fails_honestly(torch_python: Path, adaptation: Path) -> None:
    proc = run_demo(torch_python, adaptation, "--dry-run", "--device", "npu")
    result = parse_result(proc.stdout)
    assert proc.returncode == 1 and result is not None and result["ok"] is False
    assert result["device_requested"] == "npu" and result["device_used"] is None and result["outputs"] == {}
    assert result["error_kind"] == "device_unavailable"
    assert proc.stderr.strip().splitlines() == [f"error: {result['error']}"]  # one line, no traceback


def test_demo_py_allowed_fallback_runs_and_says_so(torch_python: Path, adaptation: Path) -> None:
    env = {**os.environ, "DRY_RUN": "1"}  # DRY_RUN=1 is the same as --dry-run
    proc = run_demo(torch_python, adaptation, "--device", "npu", "--allow-fallback", env=env)
    result = parse_result(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert result["ok"] is True and result["mode"] == "dry_run"
    assert (result["device_requested"], result["device_used"], result["fallback"]) == ("npu", "cpu", True)
    assert "torch_npu is not installed" in result["fallback_reason"]
    assert "FALLBACK" in proc.stdout
    assert result["outputs"]["logits"]["shape"] == [2, 32, 128]
    assert result["sharding"] is None  # the spec's two-device plan does not apply on CPU


RANK_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ab_runtime.device import rank_device, visible_indices
from ab_runtime.errors import DeviceUnavailable
out = []
for kind, env, count in json.loads(sys.argv[2]):
    try:
        rank = rank_device(kind, visible_indices(kind, env, lambda: count), env)
        out.append([rank.torch_device, rank.index, rank.backend])
    except DeviceUnavailable as exc:
        out.append(str(exc))
print(json.dumps(out))
"""
TORCHRUN = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
RANK_CASES = [  # (kind, the rank's environment, device_count under the mask) -> (device, set_device index, backend)
    (("cuda", {**TORCHRUN, "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "2,3"}, 2), ["cuda:0", 0, "nccl"]),
    (("cuda", {**TORCHRUN, "LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "2,3"}, 2), ["cuda:1", 1, "nccl"]),
    (("npu", {**TORCHRUN, "LOCAL_RANK": "1", "ASCEND_RT_VISIBLE_DEVICES": "4,5"}, 2), ["npu:1", 1, "hccl"]),
    (("npu", {**TORCHRUN, "LOCAL_RANK": "1", "ASCENDBRIDGE_NPU_INDEX": "4,5"}, 8), ["npu:5", 5, "hccl"]),  # no mask
    (("npu", {}, 1), ["npu:0", 0, "hccl"]),  # one process, as before
    (("npu", {"ASCENDBRIDGE_NPU_INDEX": "6"}, 8), ["npu:6", 6, "hccl"]),
    (("cpu", {**TORCHRUN, "LOCAL_RANK": "1"}, 0), ["cpu", None, "gloo"]),
]


def test_each_torchrun_rank_takes_its_own_card_of_the_claim_and_its_backend(torch_python: Path) -> None:
    """rank_device on the environment each rank of `torchrun --nproc_per_node 2` sees (pure: the device
    count is given, no accelerator is touched)."""
    refused = [
        ("cuda", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "2,3"}, 2),
        ("npu", {**TORCHRUN, "LOCAL_RANK": "0", "ASCENDBRIDGE_NPU_INDEX": "4"}, 8),
        ("cuda", {**TORCHRUN, "LOCAL_RANK": "x"}, 2),
    ]
    cases = [case for case, _ in RANK_CASES] + refused
    out = run_probe(torch_python, RANK_PROBE, json.dumps(cases), timeout=180)
    assert out[: len(RANK_CASES)] == [want for _, want in RANK_CASES]
    too_few, one_physical, bad_rank = out[len(RANK_CASES) :]
    assert too_few.startswith("4 cuda processes need a card each but this job sees 2 (CUDA_VISIBLE_DEVICES='2,3')")
    assert "the training stage claims one card per process" in too_few and "make 4 cards visible" in too_few
    assert "2 npu processes need a card each but this job sees 1 (ASCENDBRIDGE_NPU_INDEX='4')" in one_physical
    assert bad_rank == "LOCAL_RANK='x' is not a process index or count"


SELECT_RANK_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_npu
from ab_runtime.device import select_device
from ab_runtime.errors import DeviceUnavailable
made_current = []
torch.npu.device_count = lambda: 2  # a claim of two cards under ASCEND_RT_VISIBLE_DEVICES
torch.npu.set_device = made_current.append
os.environ.update({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "ASCEND_RT_VISIBLE_DEVICES": "4,5"})
out = {"rank1": select_device("npu").torch_device, "made_current": made_current}
os.environ.update({"WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3"})
try:
    select_device("auto")
except DeviceUnavailable as exc:
    out["refused"] = str(exc)
print(json.dumps(out))
"""


def test_select_device_makes_the_ranks_own_npu_current_and_refuses_a_claim_too_small(
    torch_python: Path, tmp_path: Path
) -> None:
    """Through FakeTorchNpu: rank 1 of 2 is made current on npu:1 (torch.npu.set_device(1)), and three
    ranks on two visible cards are refused, not silently sent to the CPU or to a shared card."""
    env = {**os.environ, "PYTHONPATH": str(_fake(tmp_path, FAKE_TORCH_NPU.format(available=True)))}
    out = run_probe(torch_python, SELECT_RANK_PROBE, timeout=180, env=env)
    assert (out["rank1"], out["made_current"]) == ("npu:1", [1])
    assert out["refused"].startswith(
        "3 npu processes need a card each but this job sees 2 (ASCEND_RT_VISIBLE_DEVICES='4,5')"
    )
