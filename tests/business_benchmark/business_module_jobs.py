"""Run inside the shared torch env: ab_runtime.business.run.main on each job, in one process.

    python business_module_jobs.py RUNTIME_PARENT JOBS_JSON

A job is {"dir": adaptation dir, "argv": [...]} (main run with cwd = dir, stdout / stderr
and the RESULT line captured) or {"greedy": adaptation dir} (the cached greedy decoder's tokens on the float32
reference next to a full re-run of the sequence per token). One JSON line per job.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path


def run_main(directory: str, argv: list[str]) -> dict:
    """main(argv) with cwd = directory: exit code, stdout, stderr and the RESULT line's JSON
    (None unless it is the last line of stdout)."""
    from ab_runtime import RESULT_MARKER
    from ab_runtime.business.run import main

    out, err = io.StringIO(), io.StringIO()
    os.chdir(directory)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    last = (out.getvalue().strip().splitlines() or [""])[-1]
    result = json.loads(last[len(RESULT_MARKER) :]) if last.startswith(RESULT_MARKER) else None
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(), "result": result}


def greedy(directory: str) -> dict:
    """Pair.greedy (workloads.HFDecoder: prefill + cached steps) against argmax over a full forward
    per token, both on the float32 CPU reference of a causal LM."""
    import torch

    from ab_runtime import device as ab_device
    from ab_runtime import harness
    from ab_runtime.business.pair import NEW_TOKENS, Pair
    from ab_runtime.spec import load_spec

    spec = load_spec(Path(directory) / "adaptation.json")
    cpu = ab_device.select_device("cpu")
    loaded = harness.load_reference(spec, cpu, use_pretrained=False)
    pair = Pair(loaded.model, loaded.model, cpu, torch.float32, "float32", loaded.config)
    prompt = [5, 17, 42, 9, 3, 77]
    cached = pair.greedy("reference", {"input_ids": torch.tensor([prompt])}, encoder_decoder=False)
    full: list[int] = []
    with torch.inference_mode():
        for _ in range(NEW_TOKENS):
            logits = loaded.model(input_ids=torch.tensor([prompt + full])).logits
            full.append(int(logits[0, -1].argmax()))
    return {"cached": cached, "full": full, "seconds": pair.seconds["reference"]}


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    import torch

    torch.set_num_threads(1)
    for job in json.loads(sys.argv[2]):
        print(json.dumps(greedy(job["greedy"]) if "greedy" in job else run_main(job["dir"], job["argv"])), flush=True)


if __name__ == "__main__":
    main()
