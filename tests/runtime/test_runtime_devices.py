"""Device inventory, the pool that hands timed stages their devices, and sizing against hosts.

Inventories are fakes (tests/support/fake_devices.py): no NPU or GPU exists here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ascendbridge.discovery.decisions import GIB, decide, device_plan, host_pool
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.workers.devices import DeviceSpecError, detect, parse_npu_smi, parse_spec, run_tool
from ascendbridge.workers.placement import DevicePool, devices_needed, pool_entry, stage_devices, stage_resources
from tests.support.fake_devices import FAKE_NPU_SMI_8X64, FAKE_NVIDIA_SMI_2X, fake_runner


def test_inventories_found_explicit_and_refused() -> None:
    npus = parse_npu_smi(FAKE_NPU_SMI_8X64)
    assert [d.index for d in npus] == list(range(8)) and {d.memory_gb for d in npus} == {64.0}
    assert npus[0].name == "910B3"
    eight = detect(None, fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0, 1, 2, 3), host="h1")
    assert (eight.kind, len(eight.devices), eight.source) == ("npu", 8, "npu-smi")
    assert eight.describe() == "h1: 8 NPU x 64 GiB (npu:0,1,2,3,4,5,6,7), 4 CPU core(s) (npu-smi)"
    two = detect(None, fake_runner(nvidia=FAKE_NVIDIA_SMI_2X), cpus=(0,), host="h2")
    assert (two.kind, [d.label for d in two.devices], two.devices[0].memory_gb) == ("cuda", ["cuda:0", "cuda:1"], 140.4)
    cpu_only = detect(None, fake_runner(), cpus=(0, 1, 2, 3, 4, 5, 6, 7), host="h3")
    assert (cpu_only.kind, cpu_only.devices, cpu_only.as_rows()[0]["cpus"]) == ("cpu", (), list(range(8)))
    subset = detect("npu:2-3,6", fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0,))
    assert [d.label for d in subset.devices] == ["npu:2", "npu:3", "npu:6"] and subset.devices[0].memory_gb == 64.0
    trusted = detect("npu:0-7", fake_runner(), cpus=(0,))  # a container without npu-smi mounted
    assert len(trusted.devices) == 8 and "npu-smi not found" in trusted.warnings[0]
    assert detect("cpu:1", fake_runner(), cpus=(0, 1)).cpus == (1,)
    with pytest.raises(DeviceSpecError, match=r"npu:8 not found by npu-smi \(it reports npu: 0,1,2,3,4,5,6,7\)"):
        detect("npu:6-8", fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0,))
    for bad, why in (
        ("gpu:0", "expected npu:LIST"),
        ("npu", "name the npu indices"),
        ("npu:3-1", "runs backwards"),
        ("cuda:a", "not an index"),
        ("npu:", "no index given"),
    ):
        with pytest.raises(DeviceSpecError, match=why):
            parse_spec(bad)
    with pytest.raises(DeviceSpecError, match="core"):
        detect("cpu:5", fake_runner(), cpus=(0, 1))


# A test double for Huawei's torch_npu (no NPU can exist here): torch_npu.npu's documented device calls.
FAKE_TORCH_NPU = '''"""FakeTorchNpu: four 64 GiB cards, answering like torch_npu.npu."""
import types

npu = types.SimpleNamespace(
    device_count=lambda: 4,
    get_device_name=lambda i: f"Ascend910B3 (FakeTorchNpu {i})",
    get_device_properties=lambda i: types.SimpleNamespace(total_memory=64 * 1024**3),
)
'''


def test_torch_npu_in_the_probe_environment_is_asked_before_npu_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real probe process (this interpreter) imports the fake torch_npu from its PYTHONPATH."""
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(FAKE_TORCH_NPU)
    smi = fake_runner(npu=FAKE_NPU_SMI_8X64)

    def runner(argv: list[str]) -> str | None:  # the probe interpreter really runs; npu-smi is faked
        return run_tool(argv) if argv[0] == sys.executable else smi(argv)

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    found = detect(None, runner, cpus=(0, 1), host="h1", python=sys.executable)
    assert (found.kind, found.source, [d.label for d in found.devices]) == (
        "npu",
        "torch_npu",
        [f"npu:{i}" for i in range(4)],
    )
    assert found.devices[2].name == "Ascend910B3 (FakeTorchNpu 2)" and {d.memory_gb for d in found.devices} == {64.0}
    with pytest.raises(DeviceSpecError, match=r"npu:4,5 not found by torch_npu \(it reports npu: 0,1,2,3\)"):
        detect("npu:0-5", runner, cpus=(0,), python=sys.executable)
    (tmp_path / "torch_npu" / "__init__.py").write_text('raise OSError("libascendcl.so missing (FakeTorchNpu)")\n')
    broken = detect(None, runner, cpus=(0,), host="h1", python=sys.executable)
    assert (broken.source, len(broken.devices)) == ("npu-smi", 8)  # torch_npu unusable: the driver tool answers
    assert detect(None, smi, cpus=(0,), host="h1").source == "npu-smi"  # no probe environment: not asked


def test_pool_hands_out_devices_exclusively_with_the_right_variable() -> None:
    npu = DevicePool(detect(None, fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0, 1), host="h1"))
    prep = npu.acquire("healing")
    assert prep is not None and (prep.devices, prep.env, prep.exclusive) == ((), {}, False)
    bench = npu.acquire("benchmark")  # profiled in-process: no mask, the physical index instead
    assert bench is not None and bench.devices == ("npu:0",) and bench.env == {"ASCENDBRIDGE_NPU_INDEX": "0"}
    business = npu.acquire("business_benchmark")  # not profiled: the mask, so its npu:0 is card 1
    assert business is not None and business.env == {"ASCEND_RT_VISIBLE_DEVICES": "1"}
    sharded = npu.acquire("optimization", 3)
    assert sharded is not None and sharded.devices == ("npu:2", "npu:3", "npu:4")
    assert npu.acquire("benchmark", 4) is None and npu.free() == 3  # 3 left: a 4-device model waits
    npu.release(sharded)
    assert npu.free() == 6 and npu.acquire("benchmark", 6) is not None and npu.acquire("benchmark") is None
    gpu = DevicePool(detect(None, fake_runner(nvidia=FAKE_NVIDIA_SMI_2X), cpus=(0,), host="h2"))
    first, second = gpu.acquire("benchmark"), gpu.acquire("benchmark")
    assert (
        first and second and (first.env, second.env) == ({"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"})
    )
    assert gpu.acquire("benchmark") is None
    cpu = DevicePool(detect(None, fake_runner(), cpus=tuple(range(8)), host="h3"))  # 2 cores per timed run
    assert cpu.slots == [(2, 3), (4, 5), (6, 7)] and cpu.preparation_cpus == (0, 1)
    timed, other = cpu.acquire("benchmark"), cpu.acquire("discovery")
    assert timed and other and timed.env == {"ASCENDBRIDGE_CPU_AFFINITY": "2,3"} and timed.devices == ("cpu:2,3",)
    assert other.env == {"ASCENDBRIDGE_CPU_AFFINITY": "0,1"} and not set(other.cpus) & set(timed.cpus)
    cpu.release(other)  # nothing prepares now: the preparation cores are lendable as one more slot
    assert cpu.acquire("benchmark", lend=True) and cpu.acquire("benchmark", lend=True)  # the two slots left
    lent = cpu.acquire("benchmark", lend=True)
    assert lent and lent.cpus == (0, 1) and lent.exclusive and cpu.lendable() == 0
    assert cpu.acquire("discovery") is None and not cpu.preparation_free()  # preparation waits while lent
    cpu.release(lent)
    prep = cpu.acquire("discovery")
    assert prep and prep.cpus == (0, 1) and cpu.lendable() == 0  # preparing: not lendable
    assert DevicePool(detect(None, fake_runner(), cpus=(0, 1)), lend=False).lendable() == 0
    lone = DevicePool(detect(None, fake_runner(), cpus=(0,)))
    assert lone.capacity == 1 and "share their cores" in lone.warnings[0]
    assert stage_resources("adaptation") == {"CPU": 1.0}
    assert stage_resources("benchmark", "npu") == {"NPU": 1.0} and stage_resources("optimization", "cuda", 2) == {
        "GPU": 2.0
    }
    assert stage_resources("business_benchmark", "cpu", 4) == {"CPU": 4.0}
    assert pool_entry(npu) == {"host": "h1", "kind": "npu", "count": 8, "memory_gb": 64.0}
    assert (
        devices_needed({"decision": {"plan": {"devices": 3}}}, "benchmark") == 3
        and devices_needed({}, "benchmark") == 1
    )
    # Serving claims the plan's tensor-parallel degree: 3 cards of weights serve on 4; other stages hold 3.
    sharded = {"decision": {"plan": {"devices": 3, "tensor_parallel_degree": 4}}}
    assert devices_needed(sharded, "serving") == 4 and devices_needed(sharded, "benchmark") == 3
    assert devices_needed({"decision": {"plan": {"devices": 2}}}, "serving") == 2  # no degree recorded
    assert stage_devices("serving", None, None) == 1 and stage_devices("serving", "x", 2) == 2
    # Training claims its job's world size (one device per torchrun process), at least the plan's count.
    assert devices_needed({}, "training", 4) == 4 and devices_needed(sharded, "training", 2) == 3
    assert devices_needed({}, "training") == 1 and devices_needed({}, "benchmark", 4) == 1
    assert stage_devices("training", None, 4, 2) == 2 and stage_devices("serving", None, None, 2) == 1


def test_size_decisions_use_the_hosts_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", raising=False)
    llama70 = ModelInfo(
        model_id="meta-llama/Llama-3.1-70B",
        source="local",
        parameter_count=70_553_706_496,
        dtype="bfloat16",
        task_family="causal_lm",
    )
    monkeypatch.setenv(
        "ASCENDBRIDGE_DEVICE_POOL", json.dumps([{"host": "h1", "kind": "npu", "count": 8, "memory_gb": 64}])
    )
    decision = decide(llama70, False, False)
    assert decision.action == "proceed" and decision.plan is not None
    assert (decision.plan["devices"], decision.plan["strategy"], decision.plan["tensor_parallel_degree"]) == (
        3,
        "device_map",
        4,
    )
    assert "needs 3 x 64 GiB devices on h1" in decision.reason
    monkeypatch.setenv(
        "ASCENDBRIDGE_DEVICE_POOL",
        json.dumps(
            [{"host": "h1", "kind": "npu", "count": 2, "memory_gb": 64}, {"host": "cpu1", "kind": "cpu", "count": 3}]
        ),
    )
    skipped = decide(llama70, False, False)
    assert (skipped.action, skipped.rule) == ("skip", "too_large")
    assert "157.7 GiB" in skipped.reason and "h1 (2 x 64 GiB npu); cpu1 (1 x 64 GiB cpu)" in skipped.reason
    assert [h.count for h in host_pool()] == [2, 1]  # a CPU host is one device whatever its timed slots
    assert device_plan(10 * GIB, host_pool(8.0))["devices"] == 2  # an explicit memory overrides the pool's
    monkeypatch.delenv("ASCENDBRIDGE_DEVICE_POOL")
    assert decide(llama70, False, False).rule == "too_large"  # no pool: one device of 64 GiB
