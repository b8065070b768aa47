"""A reduced-depth proxy through the benchmark's run: a tiny 2-layer BERT registered with `--depth 1`
builds 1 layer, and every place its figures appear says `proxy: 1 of 2 layers` (the run's output, its
metrics file, the package's README, the benchmark aggregate and the export's results). The real
accuracy_run.py in the shared torch environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ab_runtime.metrics_file import find_metrics
from ascendbridge.export.check_package import results_from_evidence
from ascendbridge.package.spec import ProxyDepth
from bench.support.tiny_adaptations import make_adaptation, run_accuracy
from benchmark.aggregate import collect

LABEL = "proxy: 1 of 2 layers"


@pytest.mark.timeout(600)
def test_a_proxy_builds_its_depth_and_its_evidence_says_so(python: Path, tmp_path: Path) -> None:
    directory = make_adaptation(tmp_path, "tiny-bert", proxy=ProxyDepth(layers=1, of=2))
    assert f"**{LABEL}**" in (directory / "README.md").read_text()
    code, result, stdout, stderr = run_accuracy(python, directory, "--device", "cpu")
    assert code == 0 and result.get("ok"), stdout[-3000:] + stderr[-3000:]
    assert f"note: {LABEL} (a registered reduced-depth proxy)" in stdout
    (metrics,) = find_metrics(directory)
    model = metrics.data["model"]
    assert (model["layers_built"], model["layers_total"], model["depth_reduced"]) == (1, 1, False)
    assert model["proxy"] == {"layers": 1, "of": 2, "stacks": {"num_hidden_layers": [1, 2]}}
    assert metrics.proxy == LABEL
    rows, _ = collect(tmp_path / "adaptations")
    assert [row["proxy"] for row in rows] == [LABEL]
    assert [row["proxy"] for row in results_from_evidence(directory)] == [LABEL]
