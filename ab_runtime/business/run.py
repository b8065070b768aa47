"""The business run behind every adaptation's business_run.py (a thin generated wrapper).

    uv run business_run.py --device cpu --dtype bfloat16 --eval ab-retrieval-en:retrieval
    uv run business_run.py --device npu --dtype bfloat16 --use-pretrained --eval ab-text-en:perplexity

Builds the model once on CPU in float32 (the reference; real weights with --use-pretrained,
else seeded config-initialised weights) and the harness's target from it on the device in the
target dtype (harness.load_reference / place_target, the benchmark's), runs every item of every
evaluation through both, one item at a time (so a re-run of any sample gives the same numbers),
and writes the raw predictions (per-item losses, generated tokens, labels, embeddings, answer
spans) to --out, with each evaluation's summed seconds per side. Sets are read from --data-dir
(JSON lines, one item a line). Without the model's own tokenizer, text is encoded as byte ids
(recorded as `byte-fallback`). The last line printed is `ASCENDBRIDGE_RESULT {json}`; exit 0:
written; 1: the run failed; 2: a bad flag or set (one `error:` line on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from .. import device as ab_device
from .. import harness, sharding
from ..errors import RuntimeDiagnosis
from ..fileops import write_text_atomic
from ..harness import HarnessError, say
from ..progress import Progress
from ..result import run_main
from ..spec import load_spec
from .lm_eval_run import run_lm_eval
from .pair import SIDES, Pair
from .tasks import GENERATING_TASKS, SEEDED_ITEMS, SEEDED_TASKS, TASKS, predict
from .text import load_tokenizer

PREDICTIONS_FORMAT = "ascendbridge.business_predictions/1"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="business_run.py", description="Business benchmark predictions for this adaptation."
    )
    p.add_argument("--device", default="auto", choices=ab_device.DEVICE_CHOICES)
    p.add_argument("--dtype", default=None, choices=sorted(harness.DTYPES), help="target dtype (default: spec)")
    p.add_argument("--use-pretrained", action="store_true", help="real weights (default: config-initialised)")
    p.add_argument("--eval", action="append", default=[], metavar="SET:TASK", help="an evaluation (repeatable)")
    p.add_argument("--data-dir", default="business_data", help="where SET.jsonl files are")
    p.add_argument("--items", default="", help="comma-separated item ids to run (default: all)")
    p.add_argument("--max-items", type=int, default=0, help="at most this many items per set (0: all)")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--out", required=True, help="predictions JSON to write")
    p.add_argument("--lm-eval", default="", metavar="TASKS", help="also run lm_eval.simple_evaluate on these tasks")
    p.add_argument("--lm-eval-include", default=None, help="directory of local lm-eval task definitions")
    p.add_argument("--lm-eval-limit", type=int, default=0, help="at most this many documents per lm-eval task")
    args = p.parse_args(argv)
    if not args.eval:
        raise HarnessError("give at least one --eval SET:TASK")
    for value in args.eval:
        task = value.partition(":")[2]
        if task not in TASKS:
            raise HarnessError(f"--eval {value}: unknown task '{task}' (tasks: {', '.join(TASKS)})")
    return args


def read_set(data_dir: Path, name: str, task: str) -> tuple[list[dict[str, Any]], str | None]:
    """(items, sha256 of the set file); a seeded task's items are indices (no file, no digest)."""
    if task in SEEDED_TASKS:
        return [{"id": f"{name}-{i:03d}", "index": i} for i in range(SEEDED_ITEMS[task])], None
    path = data_dir / f"{name}.jsonl"
    if not path.is_file():
        raise HarnessError(f"evaluation set {path} not found")
    data = path.read_bytes()
    try:
        items = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    except ValueError as exc:
        raise HarnessError(f"evaluation set {path} is not JSON lines: {exc}") from None
    return items, hashlib.sha256(data).hexdigest()


def chosen(items: list[dict[str, Any]], wanted: set[str], max_items: int) -> list[dict[str, Any]]:
    """The items --items names (all when none), at most --max-items of them."""
    items = [it for it in items if it["id"] in wanted] if wanted else items
    return items[:max_items] if max_items else items


def evaluate(
    pair: Pair, spec: Any, tok: Any, pooling: str, name: str, task: str, items: list[dict[str, Any]], digest: str | None
) -> dict[str, Any]:
    """One evaluation: both sides' predictions per item and the seconds each side spent."""
    pair.seconds = {which: 0.0 for which in SIDES}
    rows = []
    with Progress(f"evaluation {name} ({task}; reference and target)", total=len(items), unit="item") as progress:
        for item in progress.over(items):
            row: dict[str, Any] = {"id": item["id"]}
            for which in SIDES:
                torch.manual_seed(spec.recipe.seed)
                row[which] = predict(pair, task, item, which, tok=tok, spec=spec, pooling=pooling)
            rows.append(row)
    generated = sum(len(r["target"].get("tokens", [])) for r in rows) if task in GENERATING_TASKS else 0
    say(
        f"{name}:{task}: {len(rows)} item(s), target {pair.seconds['target']:.2f} s, "
        f"reference {pair.seconds['reference']:.2f} s"
    )
    return {
        "set": name,
        "task": task,
        "set_sha256": digest,
        "items": rows,
        "timing": {
            "reference_s": round(pair.seconds["reference"], 4),
            "target_s": round(pair.seconds["target"], 4),
            "generated_tokens": generated,
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    spec = load_spec(Path(args.spec))
    sets = [(value.partition(":")[0], value.partition(":")[2]) for value in args.eval]
    read = [(name, task, *read_set(Path(args.data_dir), name, task)) for name, task in sets]  # bad sets before loading
    choice = ab_device.select_device(args.device, allow_fallback=False)
    dtype_name = args.dtype or spec.dtype_target
    dtype = harness.DTYPES[dtype_name]
    loaded = harness.load_reference(spec, choice, args.use_pretrained)
    # A model larger than one device is spread over the claimed cards (ab_runtime.sharding); inputs
    # still go to choice.torch_device, the first shard's card.
    shard = sharding.plan_for(spec.device_plan, choice)
    target, device_map = harness.place_target(loaded.model, spec, choice, shard, dtype)
    pair = Pair(loaded.model, target, choice, dtype, dtype_name, loaded.config)
    tok = load_tokenizer(spec, loaded.config)
    pooling = spec.sentence_transformers_pooling or "mean"
    say(
        f"model {spec.model_id} ({spec.task_family}, mode {loaded.mode}, tokenizer {tok.kind}); "
        f"reference CPU float32, target {choice.kind} ({choice.name}) {dtype_name}"
    )
    wanted = set(filter(None, args.items.split(",")))
    evaluations = [
        evaluate(pair, spec, tok, pooling, name, task, chosen(items, wanted, args.max_items), digest)
        for name, task, items, digest in read
    ]
    lm_eval_section = (
        run_lm_eval(pair, tok, args.lm_eval, args.lm_eval_include, args.lm_eval_limit) if args.lm_eval else None
    )
    environment = harness.environment_of(choice, shard, device_map)
    predictions = {
        "format": PREDICTIONS_FORMAT,
        "model_id": spec.model_id,
        "adaptation": spec.name,
        "task_family": spec.task_family,
        "mode": loaded.mode,
        "tokenizer": tok.kind,
        "pooling": pooling,
        "device": choice.kind,
        "device_name": choice.name,
        "dtype": dtype_name,
        "reference": {"device": "cpu", "dtype": "float32"},
        "environment": {
            k: environment[k] for k in ("torch", "torch_npu", "transformers", "python", "torch_threads", "sharding")
        },
        "evaluations": evaluations,
        **({"lm_eval": lm_eval_section} if lm_eval_section else {}),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(predictions, sort_keys=True) + "\n")
    return {
        "ok": True,
        "predictions": str(out),
        "device": choice.kind,
        "dtype": dtype_name,
        "mode": loaded.mode,
        "tokenizer": tok.kind,
        "error": None,
    }


def main(argv: list[str]) -> int:
    """Run, print the RESULT line last; 0 written, 1 failed, 2 a bad flag or set."""
    return run_main(lambda: run(parse_args(argv)), failures=(RuntimeDiagnosis,), bad_input=(HarnessError,))
