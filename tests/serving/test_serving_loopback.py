"""The serving client's loopback traffic on a host with a corporate proxy (`http_proxy` set, no
`no_proxy`), and what a request without a usable answer becomes. Against a loopback stand-in of
the server's HTTP side (tests/serving/stand_in_server.py: a real engine cannot be made to reset a
connection or stall on demand); the Hub client against the Hub stand-in through a counting proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import pytest

from ascendbridge.config import REPO_ROOT
from serving.accept import Exchange, acceptance_requests, exchange_errors, run_acceptance, send
from serving.figures import acceptance_problems, serving_figures
from serving.server import free_port, healthy, loopback_env
from tests.serving.stand_in_server import TOKENS, standing
from tests.support.counting_proxy import counting_proxy

PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
REFERENCE = {"new_tokens": 3, "prompts": [[1, 2], [3, 4]], "tokens": [TOKENS, [9, 9, 9]]}


def proxied(monkeypatch: pytest.MonkeyPatch, proxy: str) -> None:
    """This process's environment as a corporate host has it: every proxy variable, no no_proxy."""
    for name in PROXY_VARS:
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)


def greedy(index: int = 0) -> Exchange:
    return acceptance_requests("m", "completions", REFERENCE, 8, 2)[index]


def test_health_and_acceptance_reach_loopback_with_a_dead_proxy_and_no_no_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxied(monkeypatch, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with standing() as server:
        # the environment is as bad as a corporate host's: clients that honour it miss the server
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"{server.url}/health", timeout=5)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{server.url}/health", timeout=5)
        assert healthy(server.url)
        requests = acceptance_requests("m", "completions", REFERENCE, 8, 2)
        done = run_acceptance(server.url, requests, 5.0)
    assert exchange_errors(done) == [] and [e["status"] for e in done] == [200] * len(requests)
    stream = next(e for e in done if e["kind"] == "stream")
    assert [c["data"]["choices"][0]["token_ids"] for c in stream["chunks"]] == [[t] for t in TOKENS]


def test_the_engine_processes_get_loopback_in_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server and `vllm bench serve` read the proxy variables themselves: their environment
    names the loopback hosts in no_proxy, keeping what was there."""
    proxied(monkeypatch, f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("no_proxy", "intranet.example")
    env = loopback_env(os.environ)
    assert env["no_proxy"] == "intranet.example,127.0.0.1,localhost,::1" and "127.0.0.1" in env["NO_PROXY"]
    assert env["http_proxy"] == os.environ["http_proxy"]  # the proxy itself stays for everything else
    with standing() as server:
        probe = f"import urllib.request; print(urllib.request.urlopen('{server.url}/health', timeout=5).status)"
        run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "200", run.stderr


def test_the_hub_client_keeps_the_proxy_while_serving_bypasses_it(
    fake_hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_hub.add("org/tiny-llama", REPO_ROOT / "demo_models" / "tiny-llama32", "a" * 40)
    with counting_proxy() as proxy, standing() as server:
        proxied(monkeypatch, proxy.url)
        probe = "from ascendbridge.discovery.hub import info_from_hub; print(info_from_hub('org/tiny-llama').model_id)"
        run = subprocess.run(
            [sys.executable, "-c", probe], env=dict(os.environ), capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0 and run.stdout.strip().endswith("org/tiny-llama"), run.stderr[-2000:]
        assert healthy(server.url)
        assert exchange_errors([send(server.url, greedy(), 5.0)]) == []
        seen = list(proxy.seen)
    hub = [line for line in seen if line.split(" ", 1)[1].startswith(fake_hub.url)]
    assert hub and len(hub) == len(seen)  # every Hub request went through the proxy, nothing of serving's
    assert any("/api/models/org/tiny-llama" in line for line in hub) and fake_hub.requests


@pytest.mark.parametrize(
    ("fault", "kind", "diagnosis"),
    [
        ("reset", 0, "ReadError"),
        ("not_json", 0, 'status 200 with a body that is not a JSON object: "<html>502 Bad Gateway'),
        ("not_json", 2, "status 200 with a text/html body, not server-sent events"),  # the streamed completion
        ("stall", 0, "no answer within 1 s (ReadTimeout)"),
    ],
)
def test_a_request_without_a_usable_answer_is_saved_with_its_diagnosis(fault: str, kind: int, diagnosis: str) -> None:
    with standing([fault]) as server:
        exchange = send(server.url, greedy(kind), 1.0)
    assert exchange["status"] == 0 and diagnosis in exchange["error"], exchange
    assert exchange["elapsed_s"] >= 0


def test_a_refused_connection_is_an_exchange_error() -> None:
    exchange = send(f"http://127.0.0.1:{free_port()}", greedy(), 5.0)
    assert exchange["status"] == 0 and exchange["error"].startswith("connection refused or failed"), exchange


def test_network_errors_become_acceptance_problems_not_a_crash() -> None:
    """A server that answers once, resets, answers a proxy's page, stalls, then is gone (refused): the figures
    are still derived, and each failed request is an acceptance problem naming what happened."""
    requests = acceptance_requests("m", "completions", REFERENCE, 8, 2)
    with standing(["ok", "reset", "not_json", "stall"]) as server:
        url = server.url
        done = run_acceptance(url, requests[:4], 1.0)
    done += run_acceptance(url, requests[4:], 1.0)  # the server is gone: connection refused
    errors = exchange_errors(done)
    figures = serving_figures(done, REFERENCE, "float32", 1.0)
    problems = errors + acceptance_problems(figures, "float32")
    assert errors[0].startswith("greedy request 1 (/v1/completions) got no answer: ReadError")
    assert errors[1] == (
        "stream request 0 (/v1/completions) got no answer: status 200 with a text/html body, not server-sent events"
    )
    assert errors[2].startswith("concurrent request 0 (/v1/completions) got no answer: no answer within 1 s")
    assert errors[3].startswith("concurrent request 1 (/v1/completions) got no answer: connection refused")
    assert len(errors) == len(requests) - 1 and figures["concurrent_answered"] == 0
    assert any(p.startswith("served greedy tokens differ") for p in problems)
    json.dumps(done)  # saved as evidence as they are
