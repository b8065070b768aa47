"""A reduced-depth proxy on the dashboard's model page: its label in the page's head and its depth row,
so no figure on the page reads as the full model's; a model at full depth says so. The real server
(`python -m dashboard`) on a real board, read over HTTP."""

from __future__ import annotations

import httpx

from ascendbridge.board import BoardStore, Registration
from tests.dashboard.dash_support import Site


def test_the_model_page_shows_the_proxy(site: Site) -> None:
    with BoardStore(site.board_path) as store:
        store.register_models(
            [
                Registration(model_id="sized/qwen3-proxy", source="local", path="/m", proxy_depth=1),
                Registration(model_id="sized/qwen3-full", source="local", path="/m"),
            ]
        )
        for model_id in ("sized/qwen3-proxy", "sized/qwen3-full"):  # what discovery leaves: the model's own depth
            store.update_model_metadata(model_id, {"architecture": "Qwen3ForCausalLM"}, {"num_layers": 28})
    proxy = httpx.get(site.url + "/models/sized/qwen3-proxy").text
    assert '<span class="badge" id="proxy-badge"' in proxy and ">proxy: 1 of 28 layers</span>" in proxy
    assert '<td id="model-depth">proxy: 1 of 28 layers (reduced-depth proxy)</td>' in proxy
    full = httpx.get(site.url + "/models/sized/qwen3-full").text
    assert 'id="proxy-badge"' not in full and '<td id="model-depth">full</td>' in full
    api = httpx.get(site.url + "/api/models/sized/qwen3-proxy").json()
    assert api["model"]["proxy_depth"] == 1 and api["proxy"] == "proxy: 1 of 28 layers"
