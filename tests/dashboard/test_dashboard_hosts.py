"""DNS rebinding: the dashboard answers only requests that name it in their Host header."""

from __future__ import annotations

import httpx
import pytest

from tests.dashboard.dash_support import Site, seed_board, served

# Every kind of route: pages, JSON, the event feed, metrics, downloads, traces, static files, writes.
ROUTES = [
    ("get", "/"),
    ("get", "/api/models"),
    ("get", "/api/overview"),
    ("get", "/models/acme/llama-tiny"),
    ("get", "/api/models/acme/llama-tiny"),
    ("get", "/api/events"),
    ("get", "/api/changes"),
    ("get", "/metrics"),
    ("get", "/healthz"),
    ("get", "/download/acme/llama-tiny"),
    ("get", "/trace/acme/llama-tiny/trace_cpu_bf16_random_synthetic.json"),
    ("get", "/reports"),
    ("get", "/api/openapi.json"),
    ("get", "/static/vendor/chartjs/LICENSE.md"),
    ("get", "/no/such/page"),
    ("post", "/api/guidance"),
]


@pytest.mark.parametrize("method,path", ROUTES)
def test_a_foreign_host_is_refused_on_every_route(site: Site, method: str, path: str) -> None:
    port = site.url.rsplit(":", 1)[1]
    for host in (
        f"attacker.example:{port}",
        "attacker.example",
        f"127.0.0.1.attacker.example:{port}",
        f"localhost.attacker.example:{port}",
        f"127.0.0.2:{port}",
    ):
        r = httpx.request(
            method.upper(),
            site.url + path,
            headers={"Host": host, **site.auth()},
            json={"text": "from a rebinding page"} if method == "post" else None,
            timeout=10,
        )
        assert r.status_code == 421, (host, r.status_code)
        assert "is not a name of this dashboard" in r.json()["error"]
        assert "acme" not in r.text


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "localhost."])
def test_loopback_names_are_answered(site: Site, host: str) -> None:
    port = site.url.rsplit(":", 1)[1]
    for path in ("/", "/api/models", "/metrics", "/download/acme/llama-tiny"):
        r = httpx.get(site.url + path, headers={"Host": f"{host}:{port}"}, timeout=10)
        assert r.status_code == 200, (host, path, r.text[:200])


def test_the_allow_list_extends_by_environment(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    board_path, logs, adaptations = seed_board(tmp_path)
    monkeypatch.setenv("ASCENDBRIDGE_DASHBOARD_HOSTS", "npu-box.lab, dash.example")
    with served(tmp_path, board_path, logs, adaptations) as url:
        port = url.rsplit(":", 1)[1]
        for host, status in (
            ("npu-box.lab", 200),
            ("DASH.example", 200),
            ("127.0.0.1", 200),
            ("attacker.example", 421),
        ):
            assert httpx.get(url + "/api/models", headers={"Host": f"{host}:{port}"}, timeout=10).status_code == status


def test_allowed_hosts_name_the_bound_address_and_the_extra_names() -> None:
    from dashboard.security import allowed_hosts

    assert allowed_hosts("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert allowed_hosts("10.1.2.3", ["Box.Lab."]) == {"127.0.0.1", "localhost", "::1", "10.1.2.3", "box.lab"}
    assert "0.0.0.0" not in allowed_hosts("0.0.0.0")
