"""Coverage: every demo model and test family through the preparation stages, as a family x outcome table.

    uv run bench/coverage.py [--stages discovery,adaptation,healing] [--workers 2] [--out DIR]
                             [--one-per-family] [--families a,b] [--markdown FILE] [--json]

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
from itertools import chain
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import demo_registrations, list_demo_models
from ascendbridge.task_families import TASK_FAMILIES
from ascendbridge.unsupported_families import needed_family, remaining

sys.path.insert(0, str(REPO_ROOT))
from bench.support.local_model import TINY_BERT_CONFIG
from bench.support.tiny_adaptations import TINY_MODELS

# Where the tests keep their tiny models: (module, attribute); each entry is either
# {"config": ..., "family": ...} or a tuple (config, family, ...). A module that is missing is skipped.
TEST_FAMILY_SOURCES = (
    ("bench.support.tiny_adaptations", "TINY_MODELS"),
    ("tests.benchmark.test_benchmark_vision", "MODELS"),
    ("tests.coverage.coverage_support", "COVERAGE_MODELS"),  # audio, time series, embedders, MoE, SSM
)


def _without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A test model's config.json less the keys that make it a whole model, to nest it in another."""
    return {k: v for k, v in config.items() if k not in keys}


def _both_sides(**sizes: int) -> dict[str, int]:
    """The same sizes under an encoder-decoder's encoder_* and decoder_* keys."""
    return {f"{side}_{key}": value for side in ("encoder", "decoder") for key, value in sizes.items()}


# Tiny configs (family, config.json) for registry families that no demo model or test model covers.
EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "coverage/tiny-bert-qa": (
        "question_answering",
        {**TINY_BERT_CONFIG, "architectures": ["BertForQuestionAnswering"]},
    ),
    "coverage/tiny-bert-ner": (
        "token_classification",
        {**TINY_BERT_CONFIG, "architectures": ["BertForTokenClassification"], "num_labels": 5},
    ),
    "coverage/tiny-vit-gpt2": (
        "vision_seq2seq",
        {  # an image captioner: ViT encoder, GPT-2 decoder with cross-attention
            "architectures": ["VisionEncoderDecoderModel"],
            "model_type": "vision-encoder-decoder",
            "decoder_start_token_id": 0,
            "pad_token_id": 0,
            "encoder": _without(
                TINY_MODELS["tiny-vit"]["config"], "architectures", "num_labels", "id2label", "label2id"
            ),
            "decoder": {
                **_without(TINY_MODELS["tiny-gpt2"]["config"], "architectures"),
                "add_cross_attention": True,
                "is_decoder": True,
            },
        },
    ),
    "coverage/tiny-detr": (
        "object_detection",
        {
            "architectures": ["DetrForObjectDetection"],
            "model_type": "detr",
            "use_timm_backbone": False,
            "use_pretrained_backbone": False,
            "backbone_config": {
                "model_type": "resnet",
                "embedding_size": 8,
                "hidden_sizes": [8, 16],
                "depths": [1, 1],
                "layer_type": "basic",
                "out_features": ["stage2"],
            },
            "d_model": 32,
            **_both_sides(layers=1, attention_heads=2, ffn_dim=64),
            "num_queries": 8,
            "id2label": {"0": "cat", "1": "dog", "2": "car"},
            "label2id": {"cat": 0, "dog": 1, "car": 2},
        },
    ),
    "coverage/tiny-dpt": (
        "depth_estimation",
        {
            "architectures": ["DPTForDepthEstimation"],
            "model_type": "dpt",
            "image_size": 32,
            "patch_size": 8,
            "num_channels": 3,
            "hidden_size": 32,
            "num_hidden_layers": 4,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "backbone_out_indices": [0, 1, 2, 3],
            "neck_hidden_sizes": [8, 16, 32, 32],
            "fusion_hidden_size": 16,
            "head_in_index": -1,
        },
    ),
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


def registrations(
    models_root: Path, one_per_family: bool = False, families: set[str] | None = None
) -> list[Registration]:
    """The demo models, the test families' tiny models, the examples and one refusal per missing family
    (with `one_per_family`, only the first model of each family: a quicker run; with `families`,
    only the models of those families, and no refusals)."""
    wanted = (lambda family: True) if families is None else families.__contains__
    demos = [(reg, demo.task_family) for reg, demo in zip(demo_registrations(include_minilm=False), list_demo_models())]
    candidates: list[tuple[str, Any, Any]] = [
        *(("demo", reg, family) for reg, family in demos),
        # a test table's own prefix ("coverage/x") would make an invalid id: tests/<last part>
        *(
            ("config", f"tests/{name.rsplit('/', 1)[-1]}", (family, config))
            for name, (family, config) in test_models().items()
        ),
        *(("config", mid, example) for mid, example in EXAMPLES.items()),
    ]
    covered: set[str] = set()
    regs: list[Registration] = []
    configs: dict[str, dict[str, Any]] = {}
    for kind, item, detail in candidates:
        family = detail if kind == "demo" else detail[0]
        if not wanted(family) or (one_per_family and family in covered):
            continue
        covered.add(family)
        if kind == "demo":
            regs.append(item)
        else:
            configs[item] = detail[1]
    for missing in remaining() if families is None else ():
        suffix = next((s for s in missing.suffixes if s.startswith("For")), None)
        if suffix:  # an architecture only known by its head, as a new user's model would be
            configs[f"refused/{missing.family}"] = {"architectures": [f"Coverage{suffix}"], "model_type": "coverage"}
    regs += [
        Registration(
            model_id=mid, source="local", path=_write_model(models_root, mid, cfg), description="bench/coverage.py"
        )
        for mid, cfg in configs.items()
    ]
    return regs


def run_team_lead(board: Path, out: Path, stages: str, workers: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ASCENDBRIDGE_EXTRA_STAGES", "PROMPT_MODE")}
    env.update(ASCENDBRIDGE_ADAPTATIONS=str(out / "adaptations"), ASCENDBRIDGE_LOGS=str(out / "logs"))
    flags = {"--board": str(board), "--stages": stages, "--workers": str(workers), "--attempts": "3"}
    argv = [sys.executable, "-m", "ascendbridge.teamlead", *chain.from_iterable(flags.items()), "--plain", "--once"]
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
        rows.append(
            {
                "model": model.model_id,
                "architecture": model.architecture or "-",
                "family": model.task_family or "(none)",
                "stages": {s: _cell(tasks[s]) for s in stages},
                "attempts": sum(tasks[s].attempts for s in stages),
                "passed": all(tasks[s].status == "completed" for s in stages),
                "note": _note(failed.diagnosis or {}, model.architecture or "") if failed else "",
                "remedy": (failed.diagnosis or {}).get("remedy") if failed else None,
            }
        )
    return sorted(rows, key=lambda r: (r["family"], r["model"]))


def family_lines(rows: list[dict[str, Any]], only: set[str] | None = None) -> list[dict[str, Any]]:
    """One line per registry family (and per refused model's missing family): examples and outcome;
    with `only`, the lines of those families."""
    by_family: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    lines = []
    for family in list(TASK_FAMILIES) + sorted(set(by_family) - set(TASK_FAMILIES)):
        if only is not None and family not in only:
            continue
        examples = by_family.get(family, [])
        passed = sum(r["passed"] for r in examples)
        outcome = (
            "no example"
            if not examples
            else f"{passed}/{len(examples)} passed"
            if family in TASK_FAMILIES
            else f"{len(examples)} refused"
        )
        lines.append(
            {"family": family, "supported": family in TASK_FAMILIES, "examples": len(examples), "outcome": outcome}
        )
    return lines


def markdown(rows: list[dict[str, Any]], families: list[dict[str, Any]], stages: list[str]) -> str:
    out = ["| family | examples | outcome |", "| --- | --- | --- |"]
    out += [f"| {f['family']} | {f['examples']} | {f['outcome']} |" for f in families]
    out += [
        "",
        "| family | model | architecture | " + " | ".join(stages) + " | attempts (all stages) | remedy / reason |",
        "| --- | --- | --- | " + " | ".join("---" for _ in stages) + " | --- | --- |",
    ]
    for r in rows:
        note = r["note"].replace("|", "/")
        out.append(
            f"| {r['family']} | {r['model']} | {r['architecture']} | "
            + " | ".join(r["stages"][s] for s in stages)
            + f" | {r['attempts']} | {note} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", default=PREPARATION, help=f"team-lead stages (default {PREPARATION})")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--one-per-family", action="store_true", help="only the first example of each family")
    p.add_argument("--families", help="only these task families, comma-separated (no refusals then)")
    p.add_argument("--out", type=Path, help="keep the board, adaptations and logs here (default: a temp dir)")
    p.add_argument("--markdown", type=Path, help="also write the tables to this file")
    p.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = p.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    families = {f.strip() for f in args.families.split(",") if f.strip()} if args.families else None
    unknown = sorted((families or set()) - set(TASK_FAMILIES))
    if unknown:
        print(f"error: unknown task families {', '.join(unknown)} (known: {', '.join(TASK_FAMILIES)})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ab-coverage-") as tmp:
        out = (args.out or Path(tmp)).resolve()
        out.mkdir(parents=True, exist_ok=True)
        board_path = out / "coverage.db"
        if board_path.exists():
            print(f"error: {board_path} exists; use an empty --out", file=sys.stderr)
            return 2
        store = BoardStore.init(board_path)
        store.register_models(registrations(out / "models", args.one_per_family, families))
        start = time.monotonic()
        run = run_team_lead(board_path, out, ",".join(stages), args.workers)
        wall = time.monotonic() - start
        if run.returncode not in (0, 1):
            print(f"error: the team lead exited {run.returncode}: {run.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
        rows = collect(store, stages)
        store.close()
    lines = family_lines(rows, families)
    if args.json:
        print(json.dumps({"stages": stages, "wall_s": round(wall, 1), "families": lines, "models": rows}, indent=2))
    else:
        text = markdown(rows, lines, stages)
        print(text + f"\n{len(rows)} models, stages {','.join(stages)}, team lead {wall:.0f} s")
        if args.markdown:
            args.markdown.write_text(text)
    broken = [r for r in rows if r["family"] in TASK_FAMILIES and not r["passed"]]
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
