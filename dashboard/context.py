"""What every request handler needs: the board (store for actions, queries for reads), paths, token."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from ascendbridge.board import BoardStore
from ascendbridge.board.queries import BoardQueries


@dataclass
class Dashboard:
    store: BoardStore
    queries: BoardQueries
    token: str
    logs_dir: Path
    adaptations_dir: Path
    heartbeat_fresh_s: float = 60.0

    def close(self) -> None:
        self.queries.close()
        self.store.close()


def dashboard(request: Request) -> Dashboard:
    """FastAPI dependency: the Dashboard the app was created with."""
    return request.app.state.dashboard
