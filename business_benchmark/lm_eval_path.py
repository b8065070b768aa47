"""The optional lm-evaluation-harness path: `lm_eval.simple_evaluate` on the adaptation's model.

lm-eval is not in the adaptation's lock (it would drag its whole dependency tree into every
package): when a run asks for it (`business_lm_eval` setting, `--lm-eval TASKS` of
business_run.py), it is installed into the adaptation's synced `.venv` with `uv pip install`.
Tasks are lm-eval task names, or local task definitions found under `business_lm_eval_include`
(a directory of task YAML files; the bundled `data/lm_eval/` one runs offline over a bundled file).
The reference and the target each run every task; the pass rule compares their task metrics.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Any

import yaml

from ascendbridge.config import uv_binary
from ascendbridge.package.uv_env import uv_environment
from ascendbridge.stable_envs import python as package_python
from ascendbridge.workers.process import run_command

LM_EVAL_REQUIREMENT = "lm-eval[hf]==0.4.13"  # the hf extra brings accelerate, which HFLM needs
LOCAL_TASK = "ab_choice_en"  # the bundled multiple-choice task over data/ab-choice-en.jsonl
LOCAL_SET = "ab-choice-en"


def local_task(data_file: Path) -> dict[str, Any]:
    """The bundled task's definition, reading `data_file` (written as YAML by PyYAML, so any path reads back)."""
    return {
        "task": LOCAL_TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "answer",
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
    }


INSTALL_TIMEOUT_S = 900.0
# lm-eval's per-sample metrics that are means over samples (what the gate can recompute)
MEAN_METRICS = ("acc", "acc_norm", "exact_match")


def install_argv(adaptation_dir: Path) -> list[str]:
    """The uv command that installs lm-eval into the adaptation's environment (its own .venv or
    its lock's stable one, never the framework's)."""
    python = package_python(Path(adaptation_dir))
    return [uv_binary(), "pip", "install", "--quiet", "--python", str(python), LM_EVAL_REQUIREMENT]


def prepare_lm_eval(adaptation_dir: Path, log: IO[str] | None = None) -> str | None:
    """Install lm-eval into the adaptation's environment; None on success, else one line."""
    if not package_python(Path(adaptation_dir)).is_file():
        return f"{adaptation_dir} has no synced .venv for lm-eval"
    res = run_command(
        install_argv(adaptation_dir), cwd=adaptation_dir, env=uv_environment(), timeout_s=INSTALL_TIMEOUT_S, log=log
    )
    if res.timed_out:
        return f"installing {LM_EVAL_REQUIREMENT} timed out after {INSTALL_TIMEOUT_S:.0f} s"
    return (
        None
        if res.ok
        else f"installing {LM_EVAL_REQUIREMENT} failed: {resolution_reason(res.output) or res.tail_line(2)}"
    )


def resolution_reason(output: str) -> str | None:
    """uv's reason a resolution failed ("Because lm-eval[hf] was not found in the cache and you require
    ... unsatisfiable."), its wrapping undone; None when the output has none."""
    found = re.search(r"Because .*?unsatisfiable\.", " ".join(output.split()))
    return found.group(0) if found else None


def write_local_task(adaptation_dir: Path) -> Path:
    """The bundled task definition, pointing at the adaptation's copy of its set; returns its folder."""
    folder = Path(adaptation_dir) / "business_data" / "lm_eval"
    folder.mkdir(parents=True, exist_ok=True)
    data_file = (Path(adaptation_dir) / "business_data" / f"{LOCAL_SET}.jsonl").resolve()
    text = yaml.safe_dump(local_task(data_file), sort_keys=False, allow_unicode=True)
    (folder / f"{LOCAL_TASK}.yaml").write_text(text, encoding="utf-8")
    return folder


def lm_eval_argv(settings: Any, adaptation_dir: Path) -> list[str]:
    include = settings.lm_eval_include or write_local_task(adaptation_dir)
    argv = ["--lm-eval", ",".join(settings.lm_eval_tasks), "--lm-eval-include", str(include)]
    return argv + (["--lm-eval-limit", str(settings.lm_eval_limit)] if settings.lm_eval_limit else [])


def derive_lm_eval(section: dict[str, Any]) -> dict[str, Any]:
    """Task metrics of the reference and the target per lm-eval task, recomputed from the logged
    per-sample values: {"task": {"<task>.<metric>": {"target", "reference"}}, "agreement": {}}."""
    task: dict[str, dict[str, float]] = {}
    for which in ("reference", "target"):
        for name, samples in sorted((section.get(which) or {}).get("samples", {}).items()):
            for metric in MEAN_METRICS:
                values = [float(s[metric]) for s in samples if isinstance(s.get(metric), (int, float))]
                if values:
                    task.setdefault(f"{name}.{metric}", {})[which] = sum(values) / len(values)
    if not task:
        raise ValueError("lm-eval results carry no per-sample metrics to recompute")
    return {"task": task, "agreement": {}}
