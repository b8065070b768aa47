"""Checkpoints through torch.distributed.checkpoint: model, optimizer, every rank's RNG states, the
step and the data position, written to a temporary directory, digested (a manifest of sha256s),
then renamed; a resume restores them all, and a damaged checkpoint is passed over.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..errors import SpecError
from ..fileops import sha256_file
from . import corpus
from .distributed import barrier
from .guards import TrainingStopped, heartbeat

if TYPE_CHECKING:
    from .config import TrainConfig
    from .data import Data

MANIFEST = "MANIFEST.json"
META = "meta.json"


def rng_state() -> dict[str, Any]:
    """Every random state of this rank: Python's, torch's CPU generator, and the accelerator's."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    for kind in ("cuda", "npu"):
        backend = getattr(torch, kind, None)
        if backend is not None and backend.is_available():
            state[kind] = backend.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    for kind in ("cuda", "npu"):
        if kind in state:
            getattr(torch, kind).set_rng_state_all(state[kind])


def tensor_bytes(value: Any) -> int:
    return int(value.numel() * value.element_size()) if isinstance(value, torch.Tensor) else 0


def checkpoint_dirs(out: Path) -> list[Path]:
    """The finished checkpoints under out/checkpoints, oldest first."""
    root = out / "checkpoints"
    return sorted(root.glob("step-*")) if root.is_dir() else []


def verify_checkpoint(path: Path) -> str | None:
    """None when every file matches the manifest's sha256, else what is wrong (one line)."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return f"{path.name}: no {MANIFEST}"
    manifest = json.loads(manifest_path.read_text())
    present = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and p.name != MANIFEST)
    if present != sorted(manifest["files"]):
        return f"{path.name}: files differ from the manifest"
    for name, digest in manifest["files"].items():
        if sha256_file(path / name) != digest:
            return f"{path.name}: {name} does not match its digest"
    return None


def latest_good_checkpoint(out: Path) -> Path | None:
    """The newest checkpoint whose digests verify (a damaged newer one is passed over)."""
    for path in reversed(checkpoint_dirs(out)):
        if verify_checkpoint(path) is None:
            return path
    return None


class CheckpointPart:
    """The Trainer's checkpoints: save and resume its whole state, refusing a disk that cannot hold it."""

    cfg: TrainConfig
    out: Path
    rank: int
    world: int
    model: nn.Module
    optimizer: torch.optim.Optimizer
    data: Data
    step_index: int
    position: corpus.Position
    losses: list[float]
    micro_batch: int
    oom_fallbacks: list[dict[str, Any]]
    checkpoint_bytes: int
    strategy: str
    precision: str
    precision_reason: str

    def _state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def check_disk(self, root: Path) -> None:
        """Refuse to write a checkpoint the disk cannot hold (twice the last one, or an estimate
        of weights + two AdamW moments before the first)."""
        need = 2 * self.checkpoint_bytes or 3 * sum(tensor_bytes(p) for p in self.model.parameters()) * self.world
        free = shutil.disk_usage(root).free
        floor = int(os.environ.get("ASCENDBRIDGE_TRAIN_MIN_FREE_BYTES", "0"))
        if free < need + floor:
            raise TrainingStopped(
                {
                    "rule": "disk_full",
                    "step": self.step_index,
                    "free_bytes": free,
                    "needed_bytes": need + floor,
                    "summary": f"step {self.step_index}: {free} bytes free under {root}, a checkpoint needs "
                    f"about {need + floor}; the run stopped before writing it",
                }
            )

    def save_checkpoint(self) -> Path:
        """Write step-NNNNNN atomically: DCP shards + per-rank RNG + meta, a manifest of sha256
        digests, then one rename; keep the last `keep_last`."""
        import torch.distributed.checkpoint as dcp

        root = self.out / "checkpoints"
        root.mkdir(parents=True, exist_ok=True)
        self.check_disk(root)
        heartbeat(self.out, self.rank, self.step_index, "checkpoint")
        final = root / f"step-{self.step_index:06d}"
        tmp = root / f".{final.name}.tmp"
        if self.rank == 0 and tmp.exists():
            shutil.rmtree(tmp)
        barrier()
        with warnings.catch_warnings():  # one process: DCP says it saves without a process group, as meant
            warnings.simplefilter("ignore", UserWarning)
            dcp.save(self._state(), checkpoint_id=str(tmp))
        torch.save(rng_state(), tmp / f"rng-rank{self.rank}.pt")
        barrier()
        if self.rank == 0:
            meta = {
                "step": self.step_index,
                "position": asdict(self.position),
                "world": self.world,
                "strategy": self.strategy,
                "precision": self.precision,
                "data_digest": self.data.digest,
                "losses": self.losses,
                "micro_batch": self.micro_batch,
                "oom_fallbacks": self.oom_fallbacks,
            }
            (tmp / META).write_text(json.dumps(meta, sort_keys=True))
            files = {str(p.relative_to(tmp)): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
            (tmp / MANIFEST).write_text(json.dumps({"files": files}, sort_keys=True, indent=1))
            self.checkpoint_bytes = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
            if final.exists():
                shutil.rmtree(final)
            os.rename(tmp, final)
            for old in checkpoint_dirs(self.out)[: -self.cfg.keep_last]:
                shutil.rmtree(old)
        barrier()
        heartbeat(self.out, self.rank, self.step_index, "train")
        return final

    def load_checkpoint(self, path: Path) -> None:
        """Restore model, optimizer, this rank's RNG states, the step, the data position and the
        micro-batch the out-of-memory ladder had reached (a checkpoint before the ladder: the config's)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict

        problem = verify_checkpoint(path)
        if problem:
            raise SpecError(f"checkpoint {problem}")
        meta = json.loads((path / META).read_text())
        if meta["world"] != self.world or meta["data_digest"] != self.data.digest:
            raise SpecError(
                f"checkpoint {path.name} was written by {meta['world']} rank(s) on other data; it cannot resume this run"
            )
        if meta.get("precision", self.precision) != self.precision:  # the size rule saw other memory figures
            raise SpecError(
                f"checkpoint {path.name} holds {meta['precision']} weights, this run chose {self.precision} "
                f"({self.precision_reason}); set bf16_weights_above to resume it"
            )
        state = self._state()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(state, checkpoint_id=str(path))
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        set_rng_state(torch.load(path / f"rng-rank{self.rank}.pt", weights_only=False))  # our own file, digest checked
        self.step_index = int(meta["step"])
        self.position = corpus.Position(**meta["position"])
        self.losses = [float(v) for v in meta["losses"]]
        self.micro_batch = int(meta.get("micro_batch", self.micro_batch))
        self.oom_fallbacks = list(meta.get("oom_fallbacks", []))
