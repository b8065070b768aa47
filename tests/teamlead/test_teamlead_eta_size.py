"""The ETA at the model's size: a stage's prior grows with the parameter count, by the shipped
default until this host has run a model of real size and by the host's own fit after; a model of
unknown size keeps a tiny model's figure and says so; every stage of the stage table has a prior."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, ModelRecord, Registration
from ascendbridge.stage_table import stage_table
from ascendbridge.stages import STAGES
from ascendbridge.teamlead.eta import COSTS_FILE, NONE, CostModel, Eta, Lanes, Sample, estimate
from ascendbridge.teamlead.history import HostHistory
from ascendbridge.teamlead.size_prior import FITTED, SizedPoint, SizeTerm, fit
from bench import eta_error
from tests.teamlead.test_teamlead_eta import NOW, model, task

TINY = 100_000  # the size the cost model below was measured at
COSTS = CostModel(
    {"discovery": {"*": 10.0}, "benchmark": {"*": 50.0}},
    size_s={"discovery": 0.0, "benchmark": 8000.0},
    params={"*": TINY},
)


def sized(n: int, params: int | None) -> ModelRecord:
    return model(n, "causal_lm").model_copy(update={"parameter_count": params})


def benchmark_eta(params: int | None, host: list[Sample] | None = None) -> Eta:
    """One pending benchmark of a model of `params` parameters, with `host` as the earlier boards."""
    return estimate(
        [task("benchmark", "pending", 1)], [sized(1, params)], ["benchmark"], [], host or [], COSTS, Lanes(1, 1), NOW
    )


def test_before_the_host_ran_a_real_size_the_prior_grows_by_the_shipped_rate_and_says_so() -> None:
    tiny, mid, large = (benchmark_eta(p) for p in (TINY, 100_000_000, 1_000_000_000))
    assert tiny.seconds == 50.0 and "scaled" not in tiny.text()  # the size the cost model measured
    assert mid.seconds == pytest.approx(50.0 + 8000.0 * (0.1 - 1e-4))  # what the size adds over it
    assert large.seconds == pytest.approx(50.0 + 8000.0 * (1.0 - 1e-4))
    assert (
        "benchmark ~2h14m x1 (prior: cost model; scaled to 1.0B params (default exponent 1, no real-size attempt here))"
        in large.text()
    )
    assert large.short() == "ETA 2h14m"


def test_a_model_of_unknown_size_keeps_a_tiny_models_figure_as_a_lower_bound_and_says_so() -> None:
    unknown = benchmark_eta(None)  # before discovery, or weights discovery could not count
    assert unknown.seconds == 50.0 and unknown.unsized == 1
    assert unknown.short() == "ETA >=50s (1 model of unknown size)"
    assert "benchmark ~50s x1 (prior: cost model; 1 of unknown size, unscaled)" in unknown.text()
    # discovery does not grow with size: an undiscovered model's discovery is no lower bound
    flat = estimate([task("discovery", "pending", 1)], [sized(1, None)], ["discovery"], [], [], COSTS, Lanes(1, 1), NOW)
    assert flat.short() == "ETA 10s" and "unknown size" not in flat.text()


def _earlier_board(path: Path, runs: list[tuple[int, float]]) -> list[Sample]:
    """A real board where each (parameters, seconds) is one model's completed benchmark: its
    discovery records the size, as the discovery stage's metadata does."""
    store = BoardStore.init(path)
    store.register_models(
        [Registration(model_id=f"org/m{i}", skip_stages=["adaptation", "healing"]) for i in range(len(runs))]
    )
    for i, (params, seconds) in enumerate(runs):
        for stage, fields in (
            ("discovery", {"task_family": "causal_lm", "parameter_count": params}),
            ("benchmark", None),
        ):
            (row,) = store.list_tasks(stage=stage, model_id=f"org/m{i}")
            claimed = store.claim_task(row.id, "test", 60)
            attempt = store.start_attempt(claimed.id, claimed.fencing_token, AttemptStart("run", "log"))
            store.complete_task(claimed.id, claimed.fencing_token, {"summary": "ok"}, model_fields=fields)
            store.finish_attempt(attempt, AttemptEnd("completed", 0, seconds if stage == "benchmark" else 5.0))
    samples = [Sample(*row) for row in store.costed_attempts()]
    store.close()
    return samples


def test_the_fit_uses_the_hosts_earlier_boards_and_the_prior_grows_as_fitted(tmp_path: Path) -> None:
    """An earlier board of this host ran the benchmark at three sizes on a host twice as slow as
    the cost model's: 2 x (50 + 3000 (P / 1e9) ** 0.7) s, and two tiny models at 2 x 50 s. The
    next board's prior follows that law, not the shipped default's."""
    law = {p: 2 * (50.0 + 3000.0 * (p / 1e9) ** 0.7) for p in (100_000_000, 300_000_000, 1_000_000_000)}
    history = tmp_path / "stage_history.json"
    earlier = _earlier_board(tmp_path / "earlier.db", [(TINY, 100.0), (TINY, 100.0), *law.items()])
    HostHistory(history, tmp_path / "earlier.db", "h1").record(earlier)
    host = HostHistory(history, tmp_path / "board.db", "h1").priors()
    assert sorted(s.params for s in host if s.stage == "benchmark") == [TINY, TINY, *law]  # the sizes travel
    term = COSTS.fitted(host).term("benchmark")
    assert (term.source, term.sizes) == (FITTED, 3)
    assert (term.exponent, term.seconds_at_1b) == (pytest.approx(0.7), pytest.approx(3000.0))
    half, two = benchmark_eta(500_000_000, host), benchmark_eta(2_000_000_000, host)
    for params, eta in ((5e8, half), (2e9, two)):  # the host's speed (x2) times the fitted law
        assert eta.seconds == pytest.approx(2 * (50.0 + 3000.0 * (params / 1e9) ** 0.7), rel=0.02)
    assert (
        "(prior: 5 attempt(s) on earlier boards of this host; scaled to 2.0B params (fitted here: 3 sizes, exponent 0.70))"
        in two.text()
    )


def test_one_size_fits_the_rate_with_the_default_exponent_and_noise_is_no_fit() -> None:
    default = SizeTerm(8000.0)
    one = fit([SizedPoint(500_000_000, 50.0 + 1000.0, 50.0, TINY)] * 2, default)
    assert (one.exponent, one.seconds_at_1b, one.sizes) == (1.0, pytest.approx(2000.0), 1)
    assert one.text() == "fitted here at 1 size, default exponent 1"
    # A slow attempt of a model too small for its size to matter is noise, not a size term (replayed
    # on a main job's board, a slow healing of a 0.15M model once fitted a rate from it).
    noise = [SizedPoint(p, 200.0, 50.0, TINY) for p in (150_000, 2_000_000)]
    assert fit(noise, default) == default
    # A model large enough to matter that took no longer than a tiny one: its size adds little.
    quick = fit([SizedPoint(TINY, 60.0, 50.0, TINY), SizedPoint(20_000_000, 60.0, 50.0, TINY)], default)
    assert quick.seconds_at_1b == pytest.approx(0.05 * 50.0 / 0.02) and quick.seconds_at_1b < default.seconds_at_1b / 50


def test_every_stage_of_the_stage_table_has_a_prior_and_a_size_figure() -> None:
    """The main job said `ETA unknown (no estimate for quantization; ...)`: a stage new to the cost
    model had no figure. Every stage now has one (the cost model's, else its stage.toml cost_s),
    and the shipped cost model says how each grows with size (0: it does not)."""
    costs = CostModel.load()
    names = [row.name for row in stage_table()]
    assert costs.size_s == {row.name: row.size_s_per_b for row in stage_table()}  # each stage.toml's rate
    grows = {stage for stage, rate in costs.size_s.items() if rate > 0}
    assert grows == set(names) - {"discovery"}  # every stage that builds the model grows with it
    assert {"*", "causal_lm"} <= set(costs.params) and "params_source" in json.loads(COSTS_FILE.read_text())["size"]
    for n, stage in enumerate(names, start=1):
        assert stage in STAGES
        eta = estimate([task(stage, "pending", n)], [sized(n, 596_000_000)], [stage], [], [], costs, Lanes(2, 1), NOW)
        (basis,) = [b for b in eta.stages if b.left]
        assert basis.source != NONE and eta.seconds is not None and eta.seconds > 0, eta.text()


def test_a_history_entry_written_before_sizes_were_kept_reads_as_unknown_sizes(tmp_path: Path) -> None:
    path = tmp_path / "stage_history.json"
    old = {"host": "h1", "updated": "2026-12-01T00:00:00+00:00", "samples": {"benchmark": {"causal_lm": [60.0]}}}
    path.write_text(json.dumps({"version": 1, "boards": {"/old/board.db": old}}))
    assert HostHistory(path, tmp_path / "board.db", "h1").priors() == [Sample("benchmark", "causal_lm", 60.0, None)]


def test_the_bench_reports_each_models_prior_error_by_size_and_the_hosts_fit_closes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/eta_error.py --per-size: a 1B model's benchmark priced by the stage.toml default rate
    is far off on a host whose law is another; with that host's history the fit prices it."""
    law = {p: 2 * (50.0 + 3000.0 * (p / 1e9) ** 0.7) for p in (100_000_000, 300_000_000, 1_000_000_000)}
    history = tmp_path / "stage_history.json"
    earlier = _earlier_board(tmp_path / "earlier.db", [(TINY, 100.0), (TINY, 100.0), *law.items()])
    HostHistory(history, tmp_path / "earlier.db").record(earlier)  # this host's name, as the bench reads it
    board = tmp_path / "board.db"
    _earlier_board(board, [(TINY, 100.0), (1_000_000_000, law[1_000_000_000])])
    costs = tmp_path / "costs.json"
    costs.write_text(
        json.dumps({"stages": {"discovery": {"*": 10.0}, "benchmark": {"*": 50.0}}, "size": {"params": {"*": TINY}}})
    )
    argv = [str(board), "--per-size", "--costs", str(costs), "--json"]
    assert eta_error.main(argv) == 0
    default = {r["params"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert eta_error.main([*argv, "--history", str(history)]) == 0
    fitted = {r["params"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert set(default) == set(fitted) == {TINY, 1_000_000_000} and default[TINY]["stages"] == 2
    # the stage.toml rate (benchmark/stage.toml) is another host's law: far off here, either way
    assert abs(default[1_000_000_000]["error_pct"]) > 20  # 6,100 s taken
    assert abs(fitted[1_000_000_000]["error_pct"]) < 2 and abs(fitted[TINY]["error_pct"]) < 2
    assert eta_error.main([str(board), "--per-size", "--costs", str(costs)]) == 0
    assert "no model of real size" not in capsys.readouterr().out
    tiny = tmp_path / "tiny.db"
    _earlier_board(tiny, [(TINY, 100.0)])
    assert eta_error.main([str(tiny), str(board), "--per-size", "--costs", str(costs)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 board(s)") and "org/m1" in out
    assert eta_error.main([str(tiny), "--per-size", "--costs", str(costs)]) == 0
    assert "no model of real size (100.0M parameters or more)" in capsys.readouterr().out
    assert eta_error.main([str(tiny), str(board)]) == 2  # the replay takes one board


def test_a_reduced_depth_proxy_is_costed_at_the_parameters_it_builds_and_its_attempts_teach_no_size(
    tmp_path: Path,
) -> None:
    """`--depth 1` of a 0.6 B model builds ~171 M parameters: the ETA scales to those, and the proxy's
    attempts (a 171 M run under a 596 M label) never feed the host's size fit."""
    config = json.loads((Path(__file__).parents[2] / "sized_models" / "qwen3-0.6b" / "config.json").read_text())
    full = 596_049_920
    proxy = sized(1, full).model_copy(update={"proxy_depth": 1, "metadata": {"config": config}})
    eta = estimate([task("benchmark", "pending", 1)], [proxy], ["benchmark"], [], [], COSTS, Lanes(1, 1), NOW)
    assert eta.seconds < benchmark_eta(full).seconds / 2
    assert "scaled to 17" in eta.text() and "scaled to 596" not in eta.text()
    samples = _earlier_board(tmp_path / "board.db", [(full, 900.0)])
    with BoardStore(tmp_path / "board.db") as store:
        store.set_proxy_depth("org/m0", 1)
        assert [s.params for s in (Sample(*row) for row in store.costed_attempts())] == [None, None]
    assert [s.params for s in samples] == [full, full]  # the same attempts, as the full model's
