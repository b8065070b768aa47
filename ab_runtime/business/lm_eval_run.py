"""lm-eval's own evaluation (`--lm-eval TASKS`) on the reference and on the target model objects."""

from __future__ import annotations

from typing import Any

from ..harness import HarnessError, say
from .pair import SIDES, Pair
from .text import ModelTokenizer, Tokenizer

LM_EVAL_SAMPLE_METRICS = ("acc", "acc_norm", "exact_match")


def run_lm_eval(pair: Pair, tok: Tokenizer, tasks_arg: str, include: str | None, limit: int) -> dict[str, Any]:
    """lm_eval.simple_evaluate on the reference and on the target (the model objects themselves,
    so the device and dtype are this run's); per-sample metrics are kept for the gate."""
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise HarnessError(f"--lm-eval needs lm-eval[hf] in this environment ({exc})") from None
    if not isinstance(tok, ModelTokenizer):
        raise HarnessError("--lm-eval needs the model's own tokenizer; this model has none")
    tasks = [t for t in tasks_arg.replace(",", " ").split() if t]
    manager = TaskManager(include_path=include) if include else TaskManager()
    section: dict[str, Any] = {"tasks": tasks, "lm_eval_version": getattr(lm_eval, "__version__", None)}
    for which in SIDES:
        wrapped = HFLM(pretrained=pair.model(which), tokenizer=tok.tok, batch_size=1, device=str(pair.devices[which]))
        out = lm_eval.simple_evaluate(
            model=wrapped,
            tasks=tasks,
            task_manager=manager,
            log_samples=True,
            limit=limit or None,
            random_seed=0,
            numpy_random_seed=0,
            torch_random_seed=0,
            fewshot_random_seed=0,
        )
        samples = {
            name: [{"doc_id": s.get("doc_id"), **{m: s[m] for m in LM_EVAL_SAMPLE_METRICS if m in s}} for s in rows]
            for name, rows in (out.get("samples") or {}).items()
        }
        results = {
            name: {k: v for k, v in values.items() if isinstance(v, (int, float, str))}
            for name, values in (out.get("results") or {}).items()
        }
        section[which] = {"results": results, "samples": samples}
        say(f"lm-eval ({which}): " + ", ".join(f"{n}: {v.get('acc,none')}" for n, v in results.items()))
    return section
