"""Training optimization passes, tried by measured gain and judged by the contract's loss bounds.

    python -m ab_runtime.train.run passes --config train.json --out DIR [--candidates compile,fused_adamw]
        [--file passes.json]

For each candidate pass, a baseline trainer (the config as it is) and a candidate trainer (the
config with the pass) are built from the same weights, data order and seeds, in this process:

1. judged: both train K steps in lockstep (K = the config's steps); the candidate's losses and
   gradient norms must stay within the baseline contract's loss bounds of the baseline's
   (contract.py: first loss, mean loss, mean gradient norm). A pass outside them is refused, with
   its figures, and never timed.
2. timed: PAIRS pairs of blocks of BLOCK steps, the order alternating (A B, B A, ...), so both see
   the same load; each block's figure is its fastest step (pairstats.py), the pair's speedup the
   baseline's over the candidate's, kept when the sign-test interval clears 1 + min gain.

Written to `--file` (default passes.json in --out): every candidate with its verdict, its loss
checks and its pairs; `kept` lists the kept passes. The stage runs it twice, the second time in a
fresh process on the kept passes only: a pass is used only when both runs keep it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import pairstats
from ..fileops import write_text_atomic
from ..progress import Progress
from ..result import Result
from . import contract as contract_table
from .config import TrainConfig
from .harness import Trainer

PAIRS = 6
BLOCK = 2
PASSES_FILE = "passes.json"
PASS_FAULTS = ("wrong_fused_adamw",)  # injected faults that concern the passes (harness.py), for tests


def _lockstep(base: Trainer, cand: Trainer, steps: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    logs: tuple[dict[str, list[float]], dict[str, list[float]]] = (
        {"losses": [], "grad_norms": []},
        {"losses": [], "grad_norms": []},
    )
    with Progress("training pass judged in lockstep (baseline and candidate)", total=steps) as progress:
        for _ in progress.over(range(steps)):
            for trainer, log in zip((base, cand), logs):
                figures = trainer.step()
                log["losses"].append(figures["loss"])
                log["grad_norms"].append(figures["grad_norm"])
    return logs


def _timed(base: Trainer, cand: Trainer) -> pairstats.PairedResult:
    """PAIRS pairs of BLOCK steps each, alternating which trainer goes first."""
    blocks: tuple[list[list[float]], list[list[float]]] = ([], [])
    with Progress(f"training pass timed ({BLOCK} steps a block)", total=PAIRS, unit="pair") as progress:
        for pair in progress.over(range(PAIRS)):
            order = ((base, 0), (cand, 1)) if pair % 2 == 0 else ((cand, 1), (base, 0))
            for trainer, side in order:
                blocks[side].append([trainer.step()["step_time_s"] * 1e3 for _ in range(BLOCK)])
    return pairstats.summarize_pairs(blocks[0], blocks[1], warmup=0)


def try_pass(cfg: TrainConfig, name: str, scratch: Path) -> dict[str, Any]:
    """One candidate pass against the config as it is: judged, then (if it holds) timed."""
    # the run's injected faults (a hang, a NaN) are the run's: only the one that breaks a pass applies here
    faults = {k: v for k, v in cfg.fault.items() if k in PASS_FAULTS}
    others = [p for p in cfg.passes if p != name]
    single = replace(cfg, strategy="single", checkpoint_every=0, keep_last=1, passes=others, fault=faults)
    base = Trainer(single, scratch / f"{name}-baseline")
    cand = Trainer(replace(single, passes=[*single.passes, name]), scratch / name)
    base_log, cand_log = _lockstep(base, cand, cfg.steps)
    judged = contract_table.loss_verdict(cand_log, base_log)
    record: dict[str, Any] = {"losses": {"baseline": base_log, "candidate": cand_log}, "loss_verdict": judged}
    if not judged["passed"]:
        failing = [c["name"] for c in judged["checks"] if not c["passed"]]
        return {**record, "verdict": "refused", "reason": f"outside the contract's loss bounds: {', '.join(failing)}"}
    timing = _timed(base, cand).as_dict()
    keep, reason = pairstats.gain_decision(timing, "pass")
    return {**record, "timing": timing, "verdict": "kept" if keep else "no_gain", "reason": reason}


def run_passes(cfg: TrainConfig, out: Path, candidates: list[str], file_name: str = PASSES_FILE) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="passes-") as scratch:
        with Progress("training passes", total=len(candidates), unit="pass") as progress:
            tried = {name: try_pass(cfg, name, Path(scratch)) for name in progress.over(candidates)}
    for name, record in tried.items():
        print(f"pass {name}: {record['verdict']} ({record['reason']})", flush=True)
    kept = [name for name, record in tried.items() if record["verdict"] == "kept"]
    record = {"candidates": tried, "kept": kept, "pairs": PAIRS, "block": BLOCK, "judged_steps": cfg.steps}
    write_text_atomic(out / file_name, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return {"ok": True, "error": None, "kept": kept, "passes": str(out / file_name)}
