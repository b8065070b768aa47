"""The workload table across models: gated benchmark figures per model and evidence set, the
optimization stage's confirmed speedup next to them, and nothing from a run whose gate failed."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, Registration
from ascendbridge.board.queries import BoardQueries
from tests.dashboard.dash_support import served

STAGES_BEFORE = ("discovery", "adaptation", "healing")
GENERATION_BF16 = {
    "ttft_ms": 9.5,
    "tpot_ms": 1.25,
    "tokens_per_s": 800.0,
    "batch_tokens_per_s": 1500.0,
    "decode_bandwidth_gbs": 3.2,
    "decode_bandwidth_pct": 16.0,
    "median_ms": 4.0,
}
ENCODER_FP32 = {
    "throughput_samples_per_s": 640.0,
    "knee_samples_per_s": 600.0,
    "batch1_latency_ms": 2.5,
    "workload_peak_memory_bytes": 8 * 1048576.0,
}


class TableCells(HTMLParser):
    """The header and the rows of the table inside the element with id SECTION, as text."""

    def __init__(self, section: str) -> None:
        super().__init__()
        self.section, self.depth = section, 0
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth or dict(attrs).get("id") == self.section:
            self.depth += tag == "section"
        if self.depth and tag == "tr":
            self.rows.append([])
        if self.depth and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag in ("td", "th") and self.cell is not None:
            (self.header if tag == "th" else self.rows[-1]).append("".join(self.cell).strip())
            self.cell = None
        if self.depth and tag == "section":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _finish(store: BoardStore, model_id: str, stage: str, figures: tuple[dict, ...] = (), ok: bool = True) -> None:
    task = store.list_tasks(stage, model_id=model_id)[0]
    claimed = store.claim_task(task.id, "team-lead-test", 60)
    attempt = store.start_attempt(claimed.id, claimed.fencing_token, AttemptStart(f"{stage} run", ""))
    if ok:
        store.finish_attempt(attempt, AttemptEnd("passed", 0, 1.0))
        store.complete_task(claimed.id, claimed.fencing_token, {}, figures=figures)
    else:  # proposed figures of a run whose gate failed stay in the attempt, never on the board
        failed = {"summary": "gate: re-timed x3 slower", "unverified": {"metrics": list(figures)}}
        store.finish_attempt(attempt, AttemptEnd("failed", 1, 1.0, failed))
        store.fail_task(claimed.id, claimed.fencing_token, failed)


def seed(root: Path) -> Path:
    board_path = root / "board.db"
    store = BoardStore.init(board_path)
    try:
        store.register_models([Registration(model_id=m) for m in ("wl/generator", "wl/encoder", "wl/refused")])
        for model_id in ("wl/generator", "wl/encoder", "wl/refused"):
            for stage in STAGES_BEFORE:
                _finish(store, model_id, stage)
        _finish(
            store,
            "wl/generator",
            "benchmark",
            (
                {"values": {**GENERATION_BF16}, "device": "cpu", "dtype": "bfloat16"},
                {"values": {"ttft_ms": 12.0, "tpot_ms": 2.0}, "device": "cpu", "dtype": "float32"},
            ),
        )
        _finish(
            store, "wl/generator", "optimization", ({"values": {"speedup": 1.8}, "device": "cpu", "dtype": "bfloat16"},)
        )
        _finish(store, "wl/encoder", "benchmark", ({"values": ENCODER_FP32, "device": "cpu", "dtype": "float32"},))
        _finish(
            store,
            "wl/refused",
            "benchmark",
            ({"values": {"tpot_ms": 0.001}, "device": "cpu", "dtype": "bfloat16"},),
            ok=False,
        )
    finally:
        store.close()
    return board_path


@pytest.fixture(scope="module")
def workload_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("workloads")
    board_path = seed(root)
    (root / "logs").mkdir()
    (root / "adaptations").mkdir()
    with served(root, board_path, root / "logs", root / "adaptations") as url:
        yield url, board_path


def test_workload_results_are_the_gated_figures_per_evidence_set(workload_site: tuple[str, Path]) -> None:
    rows = BoardQueries(workload_site[1]).workload_results()
    keyed = {(r["model_id"], r["dtype"]): r for r in rows}
    assert set(keyed) == {("wl/encoder", "float32"), ("wl/generator", "bfloat16"), ("wl/generator", "float32")}
    generator = keyed[("wl/generator", "bfloat16")]
    assert generator["figures"] == {k: v for k, v in GENERATION_BF16.items() if k != "median_ms"}  # workload only
    assert generator["speedup"] == 1.8 and keyed[("wl/generator", "float32")]["figures"]["tpot_ms"] == 2.0
    assert keyed[("wl/encoder", "float32")]["speedup"] is None  # no optimization figure yet


def test_reports_page_shows_the_workload_table(workload_site: tuple[str, Path]) -> None:
    url = workload_site[0]
    api = httpx.get(url + "/api/reports").json()
    assert [(w["model_id"], w["dtype"]) for w in api["workloads"]] == [
        ("wl/encoder", "float32"),
        ("wl/generator", "bfloat16"),
        ("wl/generator", "float32"),
    ]
    html = httpx.get(url + "/reports").text
    table = TableCells("workload-results")
    table.feed(html)
    rows = {tuple(r[:2]): dict(zip(table.header, r)) for r in table.rows if r}
    generator = rows[("wl/generator", "cpu bfloat16")]
    assert (generator["TTFT ms"], generator["TPOT ms"], generator["tokens/s"]) == ("9.5", "1.25", "800")
    assert (generator["decode bw"], generator["speedup"], generator["samples/s"]) == ("16.0%", "1.80x", "—")
    encoder = rows[("wl/encoder", "cpu float32")]
    assert (encoder["samples/s"], encoder["knee samples/s"], encoder["peak memory"]) == ("640", "600", "8.0 MiB")
    assert set(rows) == {
        ("wl/generator", "cpu bfloat16"),
        ("wl/generator", "cpu float32"),
        ("wl/encoder", "cpu float32"),
    }
