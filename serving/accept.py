"""The acceptance requests against a live server, each saved with its response and timings.

Every figure of the stage (serving/figures.py) is derived from these saved exchanges, so the gate
can recompute them and replay any request on a fresh server. Timings are seconds since the
request was sent (`elapsed_s`; a streamed response's chunks carry their own `t`).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from ab_runtime.phases import phase
from serving.server import loopback_client

Exchange = dict[str, Any]
STREAMED = ("stream", "chat_stream")  # the kinds sent with `stream: true`, answered as server-sent events


class ExchangeError(RuntimeError):
    """A request that got no usable answer: the connection failed, timed out or was reset, or the
    body of a 200 is not JSON. Saved with its exchange as `error`, an acceptance problem."""


def _network_error(exc: httpx.HTTPError, timeout_s: float) -> ExchangeError:
    """One line naming what happened to the request, for its exchange's `error`."""
    if isinstance(exc, httpx.TimeoutException):
        return ExchangeError(f"no answer within {timeout_s:g} s ({type(exc).__name__})")
    if isinstance(exc, httpx.ConnectError):
        return ExchangeError(f"connection refused or failed: {exc}")
    return ExchangeError(f"{type(exc).__name__}: {exc or 'the connection was closed mid-response'}")


def post(url: str, path: str, body: dict[str, Any], timeout_s: float) -> tuple[int, Any, float]:
    """(status, parsed JSON body or its text, seconds) of one POST; an HTTP error is a status, not an
    exception; ExchangeError when no answer came, or a 200's body is not JSON."""
    started = time.monotonic()
    try:
        with loopback_client(timeout_s) as client:
            response = client.post(f"{url}{path}", json=body)
    except httpx.HTTPError as exc:
        raise _network_error(exc, timeout_s) from None
    elapsed = time.monotonic() - started
    try:
        parsed = response.json()
    except ValueError:  # json.JSONDecodeError, or a body that is not UTF-8
        parsed = None
    if response.status_code != 200:
        return response.status_code, response.text if parsed is None else parsed, elapsed
    if not isinstance(parsed, dict):
        raise ExchangeError(f"status 200 with a body that is not a JSON object: {response.text[:200]!r}")
    return response.status_code, parsed, elapsed


def stream(url: str, path: str, body: dict[str, Any], timeout_s: float) -> tuple[int, list[dict[str, Any]], float]:
    """(status, [{"t", "data"}] per server-sent event, seconds) of one streamed POST; ExchangeError
    as `post`, or for an event that is not JSON."""
    started = time.monotonic()
    chunks: list[dict[str, Any]] = []
    try:
        with (
            loopback_client(timeout_s) as client,
            client.stream("POST", f"{url}{path}", json={**body, "stream": True}) as response,
        ):
            status = response.status_code
            if status != 200:
                response.read()
                return status, chunks, time.monotonic() - started
            kind = response.headers.get("content-type", "")
            if not kind.startswith("text/event-stream"):
                raise ExchangeError(f"status 200 with a {kind or 'untyped'} body, not server-sent events")
            for line in response.iter_lines():
                text = line.strip()
                if text.startswith("data:") and text[5:].strip() != "[DONE]":
                    try:
                        data = json.loads(text[5:])
                    except ValueError:
                        data = None
                    if not isinstance(data, dict):
                        raise ExchangeError(f"streamed event {len(chunks)} is not a JSON object: {text[:200]!r}")
                    chunks.append({"t": time.monotonic() - started, "data": data})
    except httpx.HTTPError as exc:
        raise _network_error(exc, timeout_s) from None
    return status, chunks, time.monotonic() - started


def send(url: str, exchange: Exchange, timeout_s: float) -> Exchange:
    """Send a saved exchange's request again; the exchange with the new response, or with status 0
    and the `error` that kept it from one (the acceptance goes on: a failed request is a finding)."""
    started = time.monotonic()
    try:
        if exchange["kind"] in STREAMED:
            status, chunks, elapsed = stream(url, exchange["path"], exchange["request"], timeout_s)
            return {**exchange, "status": status, "chunks": chunks, "elapsed_s": elapsed}
        status, body, elapsed = post(url, exchange["path"], exchange["request"], timeout_s)
        return {**exchange, "status": status, "response": body, "elapsed_s": elapsed}
    except ExchangeError as exc:
        return {**exchange, "status": 0, "error": str(exc), "elapsed_s": time.monotonic() - started}


def exchange_errors(exchanges: list[Exchange]) -> list[str]:
    """The requests that got no usable answer, each with what happened (acceptance problems)."""
    return [
        f"{e['kind']} request {e['index']} ({e['path']}) got no answer: {e['error']}"
        for e in exchanges
        if e.get("error")
    ]


def completion_request(name: str, prompt: list[int], new_tokens: int) -> dict[str, Any]:
    return {
        "model": name,
        "prompt": prompt,
        "max_tokens": new_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }


def chat_request(name: str, messages: list[dict[str, str]], new_tokens: int) -> dict[str, Any]:
    return {
        "model": name,
        "messages": messages,
        "max_tokens": new_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }


def acceptance_requests(
    name: str, endpoint: str, reference: dict[str, Any], max_model_len: int, concurrency: int
) -> list[Exchange]:
    """The requests to send, in order: the reference's prompts (or texts, or the reranker's query and
    documents), the chat conversation when the tokenizer has a chat template (also streamed), one
    streamed completion, `concurrency` at once, a prompt over the max model length, and one more after it."""

    def ex(kind: str, path: str, request: dict[str, Any], index: int = 0) -> Exchange:
        return {"kind": kind, "index": index, "path": path, "request": request}

    if endpoint == "completions":
        new = int(reference["new_tokens"])
        prompts = reference["prompts"]
        over = [prompts[0][i % len(prompts[0])] for i in range(max_model_len + 1)]
        chat = reference.get("chat")
        return [
            *(ex("greedy", "/v1/completions", completion_request(name, p, new), i) for i, p in enumerate(prompts)),
            *(
                [
                    ex("chat", "/v1/chat/completions", chat_request(name, chat["messages"], new)),
                    ex("chat_stream", "/v1/chat/completions", chat_request(name, chat["messages"], new)),
                ]
                if chat
                else []
            ),
            ex("stream", "/v1/completions", completion_request(name, prompts[0], new)),
            *(
                ex(
                    "concurrent",
                    "/v1/completions",
                    completion_request(name, prompts[i % len(prompts)], new),
                    i % len(prompts),
                )
                for i in range(concurrency)
            ),
            ex("overlength", "/v1/completions", completion_request(name, over, new)),
            ex("after", "/v1/completions", completion_request(name, prompts[0], new)),
        ]
    over_text = " ".join(["word"] * (max_model_len + 8))
    if endpoint == "score":  # vLLM's cross-encoder scoring: the query against each document
        docs = reference["documents"]

        def score(documents: list[str]) -> dict[str, Any]:
            return {"model": name, "queries": reference["query"], "documents": documents}

        return [
            ex("score", "/score", score(list(docs))),
            *(ex("concurrent", "/score", score([docs[i % len(docs)]]), i % len(docs)) for i in range(concurrency)),
            ex("overlength", "/score", score([over_text])),
            ex("after", "/score", score([docs[0]])),
        ]
    texts = reference["texts"]
    path = {"embeddings": "/v1/embeddings", "classify": "/classify"}[endpoint]
    return [
        ex(endpoint, path, {"model": name, "input": list(texts)}),
        *(
            ex("concurrent", path, {"model": name, "input": [texts[i % len(texts)]]}, i % len(texts))
            for i in range(concurrency)
        ),
        ex("overlength", path, {"model": name, "input": [over_text]}),
        ex("after", path, {"model": name, "input": [texts[0]]}),
    ]


def run_acceptance(url: str, requests: list[Exchange], timeout_s: float) -> list[Exchange]:
    """Send the requests: the concurrent ones at once, every other one alone and in order (the
    `measurement` phase)."""
    done: list[Exchange] = []
    group = [r for r in requests if r["kind"] == "concurrent"]
    with phase("measurement"):
        for request in requests:
            if request["kind"] != "concurrent":
                done.append(send(url, request, timeout_s))
            elif request is group[0]:
                with ThreadPoolExecutor(len(group)) as pool:
                    done += list(pool.map(lambda r: send(url, r, timeout_s), group))
    return done
