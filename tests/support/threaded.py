"""A test's HTTP server answering on a thread of the test's own process, for a `with` block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer
from typing import TypeVar

Server = TypeVar("Server", bound=BaseServer)


@contextmanager
def served_in_thread(server: Server) -> Iterator[Server]:
    """`server` answering on a daemon thread until the block ends, then shut down and its socket closed."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
