"""Coverage: every demo model and test family through the preparation stages, as a family x outcome table.

    uv run bench/coverage.py [--stages discovery,adaptation,healing] [--workers 2] [--out DIR]
                             [--markdown FILE] [--json]

Registers, on a throwaway board (or --out DIR), the bundled demo models, the tests' tiny models
(TEST_FAMILY_SOURCES: the benchmark, vision and coverage tests' tables), one tiny config per registry family that neither
covers (EXAMPLES below), and one refused architecture per family still missing
(ascendbridge/unsupported_families.py); then one team-lead run (`--once`, attempt budget 3) of
the real stages. The table has one row per model: its family, each stage's outcome (a refusal
with its rule and remedy), the attempts used, and then one line per registry family, so a family
added to ascendbridge/task_families.py shows up here on its own ("no example" until it has one).
Not a test: it prints what happened. Exit 0 when every supported family's examples passed every
stage run, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import demo_registrations, list_demo_models
from ascendbridge.task_families import TASK_FAMILIES
from ascendbridge.unsupported_families import needed_family, remaining

sys.path.insert(0, str(REPO_ROOT))

# Where the tests keep their tiny models: (module, attribute); each entry is either
# {"config": ..., "family": ...} or a tuple (config, family, ...). A module that is missing is skipped.
TEST_FAMILY_SOURCES = (
    ("tests.benchmark.bench_support", "TINY_MODELS"),
    ("tests.benchmark.test_benchmark_vision", "MODELS"),
    ("tests.coverage.coverage_support", "COVERAGE_MODELS"),  # audio, time series, embedders, MoE, SSM
)

_BERT = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 64, "type_vocab_size": 2}
# Tiny configs for registry families that no demo model or test model covers.
EXAMPLES: dict[str, dict[str, Any]] = {
    "coverage/tiny-bert-qa": {"architectures": ["BertForQuestionAnswering"], **_BERT},
    "coverage/tiny-bert-ner": {"architectures": ["BertForTokenClassification"], **_BERT, "num_labels": 5},
    "coverage/tiny-vit-gpt2": {  # an image captioner: ViT encoder, GPT-2 decoder with cross-attention
        "architectures": ["VisionEncoderDecoderModel"], "model_type": "vision-encoder-decoder",
        "decoder_start_token_id": 0, "pad_token_id": 0,
        "encoder": {"model_type": "vit", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                    "intermediate_size": 64, "image_size": 32, "patch_size": 8, "num_channels": 3},
        "decoder": {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 128,
                    "n_positions": 64, "add_cross_attention": True, "is_decoder": True},
    },
}
PREPARATION = "discovery,adaptation,healing"


def test_models() -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (family, config.json) of every tiny model the tests define (TEST_FAMILY_SOURCES)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for module_name, attribute in TEST_FAMILY_SOURCES:
        try:
            table = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            continue
        for name, entry in table.items():
            config, family = (entry["config"], entry["family"]) if isinstance(entry, dict) else (entry[0], entry[1])
            found.setdefault(name, (family, config))
    return found


def _write_model(root: Path, model_id: str, config: dict[str, Any]) -> str:
    directory = root / model_id.replace("/", "--")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def registrations(models_root: Path, one_per_family: bool = False) -> list[Registration]:
    """The demo models, the test families' tiny models, the examples and one refusal per missing family
    (with `one_per_family`, only the first model of each family: a quicker run)."""
    regs = demo_registrations(include_minilm=False)
    tests = test_models()
    configs = {f"tests/{name}": config for name, (_, config) in tests.items()}
    if one_per_family:
        covered: set[str] = set()
        demos = []
        for reg, demo in zip(regs, list_demo_models()):
            if demo.task_family not in covered:
                covered.add(demo.task_family)
                demos.append(reg)
        regs = demos
        configs = {}
        for name, (family, config) in tests.items():
            if family not in covered:
                covered.add(family)
                configs[f"tests/{name}"] = config
    configs.update(EXAMPLES)
    for missing in remaining():
        suffix = next((s for s in missing.suffixes if s.startswith("For")), None)
        if suffix:  # an architecture only known by its head, as a new user's model would be
            configs[f"refused/{missing.family}"] = {"architectures": [f"Coverage{suffix}"], "model_type": "coverage"}
    regs += [Registration(model_id=mid, source="local", path=_write_model(models_root, mid, cfg),
                          description="bench/coverage.py") for mid, cfg in configs.items()]
    return regs


def run_team_lead(board: Path, out: Path, stages: str, workers: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ASCENDBRIDGE_EXTRA_STAGES", "PROMPT_MODE")}
    env.update(ASCENDBRIDGE_ADAPTATIONS=str(out / "adaptations"), ASCENDBRIDGE_LOGS=str(out / "logs"))
    argv = [sys.executable, "-m", "ascendbridge.teamlead", "--board", str(board), "--stages", stages,
            "--workers", str(workers), "--attempts", "3", "--plain", "--once"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO_ROOT)


def _cell(task: Any) -> str:
    if task.status != "failed" and task.status != "blocked":
        return task.status
    diag = task.diagnosis or {}
    refusal = " refusal" if diag.get("retryable") is False else ""
    return f"{task.status}{refusal} ({diag.get('rule', '?')})"


def _note(diagnosis: dict[str, Any], architecture: str) -> str:
    """The table's short reason: the family a refused architecture needs, else the remedy or summary."""
    need = needed_family(architecture) if diagnosis.get("rule") == "unknown_task_family" else None
    if need is not None:
        return f"needs the {need.family} family (docs/adaptation.md)"
    text = str(diagnosis.get("remedy") or diagnosis.get("summary") or "")
    return text if len(text) <= 160 else text[:157] + "..."


def collect(store: BoardStore, stages: list[str]) -> list[dict[str, Any]]:
    rows = []
    for model in store.list_models():
        tasks = {t.stage: t for t in store.list_tasks(model_id=model.model_id)}
        failed = next((tasks[s] for s in stages if tasks[s].status in ("failed", "blocked")), None)
        rows.append({
            "model": model.model_id, "architecture": model.architecture or "-",
            "family": model.task_family or "(none)",
            "stages": {s: _cell(tasks[s]) for s in stages},
            "attempts": sum(tasks[s].attempts for s in stages),
            "passed": all(tasks[s].status == "completed" for s in stages),
            "note": _note(failed.diagnosis or {}, model.architecture or "") if failed else "",
            "remedy": (failed.diagnosis or {}).get("remedy") if failed else None,
        })
    return sorted(rows, key=lambda r: (r["family"], r["model"]))


def family_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per registry family (and per refused model's missing family): examples and outcome."""
    by_family: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    lines = []
    for family in list(TASK_FAMILIES) + sorted(set(by_family) - set(TASK_FAMILIES)):
        examples = by_family.get(family, [])
        passed = sum(r["passed"] for r in examples)
        outcome = ("no example" if not examples else f"{passed}/{len(examples)} passed" if family in TASK_FAMILIES
                   else f"{len(examples)} refused")
        lines.append({"family": family, "supported": family in TASK_FAMILIES, "examples": len(examples),
                      "outcome": outcome})
    return lines


def markdown(rows: list[dict[str, Any]], families: list[dict[str, Any]], stages: list[str]) -> str:
    out = ["| family | examples | outcome |", "| --- | --- | --- |"]
    out += [f"| {f['family']} | {f['examples']} | {f['outcome']} |" for f in families]
    out += ["", "| family | model | architecture | " + " | ".join(stages) + " | attempts (all stages) | remedy / reason |",
            "| --- | --- | --- | " + " | ".join("---" for _ in stages) + " | --- | --- |"]
    for r in rows:
        note = r["note"].replace("|", "/")
        out.append(f"| {r['family']} | {r['model']} | {r['architecture']} | "
                   + " | ".join(r["stages"][s] for s in stages) + f" | {r['attempts']} | {note} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", default=PREPARATION, help=f"team-lead stages (default {PREPARATION})")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--one-per-family", action="store_true", help="only the first example of each family")
    p.add_argument("--out", type=Path, help="keep the board, adaptations and logs here (default: a temp dir)")
    p.add_argument("--markdown", type=Path, help="also write the tables to this file")
    p.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = p.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="ab-coverage-") as tmp:
        out = (args.out or Path(tmp)).resolve()
        out.mkdir(parents=True, exist_ok=True)
        board_path = out / "coverage.db"
        if board_path.exists():
            print(f"error: {board_path} exists; use an empty --out", file=sys.stderr)
            return 2
        store = BoardStore.init(board_path)
        store.register_models(registrations(out / "models", args.one_per_family))
        start = time.monotonic()
        run = run_team_lead(board_path, out, ",".join(stages), args.workers)
        wall = time.monotonic() - start
        if run.returncode not in (0, 1):
            print(f"error: the team lead exited {run.returncode}: {run.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
        rows = collect(store, stages)
        store.close()
    families = family_lines(rows)
    if args.json:
        print(json.dumps({"stages": stages, "wall_s": round(wall, 1), "families": families, "models": rows}, indent=2))
    else:
        text = markdown(rows, families, stages)
        print(text + f"\n{len(rows)} models, stages {','.join(stages)}, team lead {wall:.0f} s")
        if args.markdown:
            args.markdown.write_text(text)
    broken = [r for r in rows if r["family"] in TASK_FAMILIES and not r["passed"]]
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
