"""The bundled lm-eval task file is written by PyYAML: a data path with awkward characters reads back."""

from __future__ import annotations

from pathlib import Path

import yaml

from business_benchmark.lm_eval_path import LOCAL_SET, LOCAL_TASK, write_local_task


def test_the_task_file_round_trips_an_awkward_data_path(tmp_path: Path) -> None:
    directory = tmp_path / 'it\'s "a": 100% # é 中 😀\nnext'
    folder = write_local_task(directory)
    task = yaml.safe_load((folder / f"{LOCAL_TASK}.yaml").read_text(encoding="utf-8"))
    assert task["task"] == LOCAL_TASK and task["output_type"] == "multiple_choice"
    assert task["dataset_kwargs"]["data_files"]["test"] == str(directory / "business_data" / f"{LOCAL_SET}.jsonl")
    assert task["doc_to_text"] == "Question: {{question}}\nAnswer:" and task["doc_to_choice"] == "{{choices}}"
    assert task["metric_list"] == [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]
