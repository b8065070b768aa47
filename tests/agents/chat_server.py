"""FakeChatCompletionsServer: a local stand-in for an OpenAI-compatible endpoint (no LLM exists
in tests). A real HTTP server on 127.0.0.1 that speaks POST /v1/chat/completions, records every
request it receives, and answers with scripted content, usage, or a delay (to test timeouts).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeChatCompletionsServer:
    def __init__(self, content: str, total_tokens: int = 1234, delay_s: float = 0.0) -> None:
        self.content = content
        self.total_tokens = total_tokens
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                time.sleep(server.delay_s)
                reply = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": server.content},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": server.total_tokens - 100,
                            "completion_tokens": 100,
                            "total_tokens": server.total_tokens,
                        },
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeChatCompletionsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
