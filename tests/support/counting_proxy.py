"""A forward HTTP proxy on loopback that counts what goes through it: a test sets `http_proxy` to it
and proves which clients honour the proxy variables (the Hub's) and which never use it for
loopback (the serving client's). It relays each request (absolute-form target) to its host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from tests.support.threaded import served_in_thread

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "transfer-encoding", "te"}


class CountingProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.seen: list[str] = []  # "METHOD absolute-url" of every request relayed

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Relay(BaseHTTPRequestHandler):
    server: CountingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _relay(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
        with httpx.Client(trust_env=False, timeout=30) as client:
            answer = client.request(self.command, self.path, headers=headers, content=body)
        self.send_response(answer.status_code)
        for key, value in answer.headers.items():
            if key.lower() not in HOP_BY_HOP | {"content-length", "content-encoding"}:
                self.send_header(key, value)
        length = answer.headers.get("content-length", "0") if self.command == "HEAD" else str(len(answer.content))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.content)

    do_GET = do_HEAD = do_POST = _relay


@contextmanager
def counting_proxy() -> Iterator[CountingProxy]:
    with served_in_thread(CountingProxy()) as proxy:
        yield proxy
