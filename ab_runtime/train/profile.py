"""A profiled window of steady-state training steps: where the step's time goes, and the model
FLOPs per token that MFU is computed from.

    python -m ab_runtime.train.run profile --config train.json --out DIR

Builds the run's model as `train` does (one process), trains WARMUP steps unprofiled (the
allocator and the first-call paths warm up), then PROFILED steps under the device's profiler
(torch.profiler on CPU and CUDA; torch_npu.profiler on Ascend, its documented `profile` /
`ProfilerActivity.NPU` / `schedule` API of torch_npu 2.x), exports the Chrome trace
(`profile_trace.json`, loadable in Perfetto) and writes `profile.json`: the reduced table
(profile_table.py), the unprofiled steps' tokens/s and the FLOPs per token (flops.py). The steps
train a throw-away copy: the run's own weights and metrics are not touched.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..fileops import write_text_atomic
from ..progress import Progress
from ..result import Result
from .config import TrainConfig
from .flops import training_flops_per_token
from .harness import Trainer
from .profile_table import reduce_trace

WARMUP = 2
PROFILED = 3
TRACE_FILE = "profile_trace.json"
PROFILE_FILE = "profile.json"


def profiler_for(kind: str, steps: int, trace: Path) -> Any:
    """The device's profiler over `steps` steps after one skipped, exporting the Chrome trace to
    `trace` when the window closes (each step is marked by calling its `step()`)."""
    if kind == "npu":
        import torch_npu  # Ascend only

        prof = torch_npu.profiler
        activities = [prof.ProfilerActivity.CPU, prof.ProfilerActivity.NPU]
    else:
        prof = torch.profiler
        activities = [prof.ProfilerActivity.CPU, *([prof.ProfilerActivity.CUDA] if kind == "cuda" else [])]
    return prof.profile(
        activities=activities,
        schedule=prof.schedule(wait=0, warmup=1, active=steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),
    )


def embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters of the input embeddings (looked up, not multiplied)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return sum(p.numel() for p in embeddings.parameters()) if embeddings is not None else 0


def run_profile(cfg: TrainConfig, out: Path) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="profile-run-") as scratch:  # no checkpoint is kept
        # no injected fault (a hang, a NaN): those are the run's, not the profile's
        window = replace(cfg, strategy="single", checkpoint_every=0, keep_last=1, fault={})
        trainer = Trainer(window, Path(scratch))
        with Progress("profile warm-up", total=WARMUP) as progress:
            warm = [trainer.step() for _ in progress.over(range(WARMUP))]
        trace = out / TRACE_FILE
        started = time.perf_counter()
        with (
            profiler_for(trainer.device.kind, PROFILED, trace) as profiler,
            Progress("profiled steps", PROFILED + 1) as p,
        ):
            for _ in p.over(range(PROFILED + 1)):  # the schedule's first step is its warm-up
                trainer.step()
                profiler.step()
        profiled_s = time.perf_counter() - started
    core = trainer.core
    parameters = sum(p.numel() for p in core.parameters())
    trainable = sum(p.numel() for p in core.parameters() if p.requires_grad)
    config = trainer.model_config.to_dict() if hasattr(trainer.model_config, "to_dict") else {}
    record: dict[str, Any] = {
        "table": reduce_trace(json.loads(trace.read_text())),
        "warmup_tokens_per_s": [f["tokens_per_s"] for f in warm],
        "profiled_wall_s": profiled_s,
        "device": trainer.device.kind,
        "precision": trainer.precision,
        "parameters": parameters,
        "trainable": trainable,
        "seq_len": cfg.seq_len,
        "flops_per_token": training_flops_per_token(
            config, parameters, trainable, cfg.seq_len, embedding_parameters(core)
        ),
        "trace": TRACE_FILE,
    }
    write_text_atomic(out / PROFILE_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return {"ok": True, "error": None, "profile": str(out / PROFILE_FILE)}
