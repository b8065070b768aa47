"""The evidence tools' `compare` tables (ascendbridge/cli/evidence_tool.py `aligned`)."""

from __future__ import annotations

from ascendbridge.cli.evidence_tool import aligned


def test_each_column_is_as_wide_as_its_widest_cell_names_left_figures_right() -> None:
    rows = [
        ("set", "metric", "A"),
        ("hf:mteb/stsbenchmark-sts-longer", "m", "0.5"),  # wider than any fixed column was
        ("s", "similarity_spearman_agreement", "12.25"),
    ]
    lines = aligned(rows, left=2)
    assert len({len(line) for line in lines}) == 1  # no row drifts
    assert lines[1].startswith("hf:mteb/stsbenchmark-sts-longer m ")  # the name whole, then its column
    assert [line[-5:] for line in lines] == ["    A", "  0.5", "12.25"]  # figures right-aligned
    assert lines[2].split()[:2] == ["s", "similarity_spearman_agreement"]
