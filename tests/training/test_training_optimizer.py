"""Which AdamW the device layer gives the harness: the fused NPU kernel except under FSDP2, and
torch's AdamW on CPU or when torch_npu lacks it. Selection only (no NPU here): a stand-in
torch_npu package on the path provides the class the selection must name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.training.train_support import run_env

PROBE = """
import json, torch
from ab_runtime.device import DeviceChoice, adamw_class
npu = DeviceChoice("npu", "npu", "npu:0", "stand-in", False, None, None)
cpu = DeviceChoice("cpu", "cpu", "cpu", "cpu", False, None, None)
out = {}
for label, choice, sharded in (("npu", npu, False), ("npu_fsdp2", npu, True), ("cpu", cpu, False)):
    cls, reason = adamw_class(choice, sharded)
    out[label] = [cls.__module__ + "." + cls.__name__, reason]
print(json.dumps(out))
"""


def probe(torch_python: Path, extra_path: Path | None) -> dict[str, list[str]]:
    env = run_env()
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}:{env['PYTHONPATH']}"
    proc = subprocess.run([str(torch_python), "-c", PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_fused_npu_adamw_is_chosen_except_under_fsdp2(tmp_path: Path, torch_python: Path) -> None:
    package = tmp_path / "torch_npu"
    (package / "optim").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "optim" / "__init__.py").write_text("import torch\nclass NpuFusedAdamW(torch.optim.AdamW):\n    pass\n")
    chosen = probe(torch_python, tmp_path)
    assert chosen["npu"][0] == "torch_npu.optim.NpuFusedAdamW"
    assert chosen["npu_fsdp2"][0] == "torch.optim.adamw.AdamW" and "FSDP2" in chosen["npu_fsdp2"][1]
    assert chosen["cpu"][0] == "torch.optim.adamw.AdamW"


def test_without_torch_npu_the_npu_falls_back_to_torch_adamw_and_says_why(torch_python: Path) -> None:
    chosen = probe(torch_python, None)
    assert chosen["npu"][0] == "torch.optim.adamw.AdamW" and "unavailable" in chosen["npu"][1]
