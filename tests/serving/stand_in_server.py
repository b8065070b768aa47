"""A loopback stand-in for the vLLM server's HTTP side, for what a real engine cannot be made to do
on demand: reset a connection, answer a 200 that is not JSON, stall past the client's timeout, die
mid-run. It answers /health and the completion endpoints with fixed token ids (streamed as
server-sent events when asked); `faults` lists, per POST in arrival order, what it does instead of
answering (`ok`, `reset`, `not_json`, `stall`, `exit`); POSTs past the list are answered.

In a test's thread (`standing`) or as the server process the stage starts:
`python tests/serving/stand_in_server.py PORT [FAULT ...]`.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKENS = [5, 6, 7]
STALL_S = 30.0


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, faults: list[str]) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.faults = list(faults)
        self.posts = 0
        self.lock = threading.Lock()

    def next_fault(self) -> str:
        with self.lock:
            fault = self.faults[self.posts] if self.posts < len(self.faults) else "ok"
            self.posts += 1
            return fault

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: StandInServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200 if self.path == "/health" else 404, b"")

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        fault = self.server.next_fault()
        if fault == "reset":  # an RST instead of an answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if fault == "exit":
            os._exit(1)
        if fault == "stall":
            time.sleep(STALL_S)
        if fault == "not_json":
            self._send(200, b"<html>502 Bad Gateway (a proxy's page)</html>", "text/html")
            return
        if not request.get("stream"):
            self._send(200, json.dumps({"choices": [{"index": 0, "token_ids": TOKENS}]}).encode())
            return
        events = [{"choices": [{"index": 0, "token_ids": [t]}]} for t in TOKENS]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(200, body.encode(), "text/event-stream")


@contextmanager
def standing(faults: list[str] | None = None) -> Iterator[StandInServer]:
    """The stand-in on a free loopback port in a thread of this process, for the block."""
    from tests.support.threaded import served_in_thread  # here: the script alone runs without the checkout's tests

    with served_in_thread(StandInServer(0, faults or [])) as server:
        yield server


if __name__ == "__main__":
    StandInServer(int(sys.argv[1]), sys.argv[2:]).serve_forever()
