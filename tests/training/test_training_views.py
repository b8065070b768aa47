"""The gated training run for people: the dashboard's model page has a Training section (the job,
the held-out verdict, the loss curve's data, the figures) and the reports a training row, both
only once the training gate passed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.records import TrainingJob
from ascendbridge.stages import STAGES
from tests.dashboard.dash_support import complete, served
from tests.training.train_support import CORPUS

FIGURES = {
    "loss_first": 5.61,
    "loss_last": 2.25,
    "eval_loss_before": 5.6,
    "eval_loss_after": 2.4,
    "eval_verdict": 1.0,
    "contract_passed": 1.0,
    "tokens_per_s": 1234.0,
    "micro_batch": 2.0,
    "oom_fallbacks": 1.0,
}


def test_the_model_page_and_the_reports_show_a_training_run_once_gated(tmp_path: Path) -> None:
    board_path, adaptations, logs = tmp_path / "board.db", tmp_path / "adaptations", tmp_path / "logs"
    logs.mkdir()
    store = BoardStore.init(board_path)
    [(record, _)] = store.register_models(
        [
            Registration(
                model_id="acme/tiny-llama", training=TrainingJob(data=str(CORPUS), method="lora", steps=3, processes=2)
            )
        ]
    )
    run = adaptations / record.adaptation_name / "train" / "run"
    run.mkdir(parents=True)
    run.joinpath("metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "loss": 6.0 - i, "grad_norm": 0.5}) + "\n" for i in (1, 2, 3))
    )
    run.joinpath("evaluation.json").write_text(
        json.dumps({"before": {"loss": 5.6}, "after": {"loss": 2.4}, "verdict": {"verdict": "improved", "gap": 0.15}})
    )
    table = {
        "steps": 3,
        "shares": {"compute": 0.8, "optimizer": 0.05, "host_overhead_and_idle": 0.15},
        "operators": [{"name": "aten::mm", "ms": 12.5, "share": 0.7}, {"name": "aten::sum", "ms": 3.25, "share": 0.2}],
    }
    profile = {
        "table": table,
        "device": "cpu",
        "precision": "fp32",
        "flops_per_token": 739200.0,
        "trace": "profile_trace.json",
    }
    run.joinpath("profile.json").write_text(json.dumps(profile))
    for stage in STAGES[: STAGES.index("training")]:
        complete(store, record.model_id, stage)
    with served(tmp_path, board_path, logs, adaptations) as url:
        before = httpx.get(f"{url}/models/{record.model_id}", timeout=30).text
        complete(
            store,
            record.model_id,
            "training",
            ({"values": FIGURES, "device": "cpu", "dtype": "bf16-autocast", "units": {"tokens_per_s": "tokens/s"}},),
        )
        page = httpx.get(f"{url}/models/{record.model_id}", timeout=30).text
        data = httpx.get(f"{url}/api/models/{record.model_id}", timeout=30).json()
        reports = httpx.get(f"{url}/reports", timeout=30).text
    store.close()
    assert "Not trained" in before and 'id="loss-chart"' not in before  # not gated yet: the log is no evidence
    section = page[page.index('id="training"') :]
    section = section[: section.index("</section>")]
    assert "lora" in section and "improved" in section and 'id="loss-chart"' in section and "tokens_per_s" in section
    assert "2 processes" in section and "oom_fallbacks" in section
    profiled = section[section.index('id="training-profile"') :]  # the profiled window's table, largest part first
    assert profiled.index("compute") < profiled.index("host overhead and idle") < profiled.index("optimizer")
    assert "<code>aten::mm</code>" in profiled and "12.50" in profiled and "739,200 model FLOPs per token" in profiled
    assert data["charts"]["loss"] == {"step": [1.0, 2.0, 3.0], "loss": [5.0, 4.0, 3.0], "grad_norm": [0.5, 0.5, 0.5]}
    row = reports[reports.index('id="training-results"') :]
    row = row[: row.index("</section>")]
    assert record.model_id in row and "5.61 &rarr; 2.25" in row and "improved" in row and "passed" in row
    assert '<td class="num">2 (1)</td>' in row  # micro-batch 2 after one out-of-memory fallback
