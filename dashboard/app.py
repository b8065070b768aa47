"""The FastAPI application: routers, static files, and one place that turns errors into 4xx.

Every error a user can cause ends here as a short message: JSON ({"error": ...}) for /api/,
/healthz and /metrics, an HTML page otherwise. Nothing half-done reaches the board because each
action is one store call, and the store call is one transaction.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ascendbridge.board import BoardError, BoardStore, UnknownModelError
from ascendbridge.board.connection import writable
from ascendbridge.board.queries import BoardQueries, QueryError
from ascendbridge.naming import InvalidModelIdError
from ascendbridge.stages import UnknownNameError
from dashboard import actions, api, pages
from dashboard.context import Dashboard
from dashboard.evidence import EvidenceError
from dashboard.security import LOOPBACK_NAMES, MAX_BODY_BYTES, ActionDenied, BodyLimitMiddleware, HostAllowMiddleware

STATIC_DIR = Path(__file__).parent / "static"
_JSON_PREFIXES = ("/api/", "/healthz", "/metrics")


def _error(request: Request, status: int, message: str) -> Response:
    if request.url.path.startswith(_JSON_PREFIXES) and request.url.path != "/api/docs":
        return JSONResponse({"error": message}, status_code=status)
    return pages.render(
        request, "error.html", {"page": "error", "status": status, "message": message}, status_code=status
    )


def _validation_message(exc: RequestValidationError) -> str:
    first = exc.errors()[0] if exc.errors() else {}
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in ("model_attributes_type", "dict_type"):
        return "request body must be a JSON object (Content-Type: application/json)"
    if first.get("type") == "json_invalid":
        return "request body is not valid JSON"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
    return f"invalid {where}: {first.get('msg', 'bad value')}"


def _install_error_handlers(app: FastAPI) -> None:
    statuses: list[tuple[type[Exception], int]] = [
        (UnknownModelError, 404),
        (EvidenceError, 404),
        (InvalidModelIdError, 400),
        (UnknownNameError, 400),
        (QueryError, 400),
        (actions.BadAction, 400),
        (BoardError, 409),  # the board refused: the request conflicts with the model's state
    ]
    for exc_type, status in statuses:
        app.add_exception_handler(exc_type, lambda r, e, s=status: _error(r, s, str(e)))
    app.add_exception_handler(ActionDenied, lambda r, e: _error(r, e.status, e.message))
    app.add_exception_handler(RequestValidationError, lambda r, e: _error(r, 400, _validation_message(e)))
    app.add_exception_handler(StarletteHTTPException, lambda r, e: _error(r, e.status_code, str(e.detail or "error")))


def create_app(
    board: str | os.PathLike[str],
    token: str,
    logs_dir: Path,
    adaptations_dir: Path,
    max_body_bytes: int = MAX_BODY_BYTES,
    heartbeat_fresh_s: float = 60.0,
    store: BoardStore | None = None,
    hosts: frozenset[str] = LOOPBACK_NAMES,
) -> FastAPI:
    """Open the board (it must exist) and build the app, answering only requests whose Host is
    one of `hosts` (security.allowed_hosts). Raises BoardError with a clear message."""
    if store is None:  # a board it cannot write is still shown; its actions answer 409
        store = BoardStore(board, read_only=Path(board).is_file() and not writable(Path(board)))
    state = Dashboard(
        store=store,
        queries=BoardQueries(store.path),
        token=token,
        logs_dir=logs_dir,
        adaptations_dir=adaptations_dir,
        heartbeat_fresh_s=heartbeat_fresh_s,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        state.close()

    app = FastAPI(
        lifespan=lifespan,
        title="AscendBridge dashboard",
        summary="The board live: models, stages, evidence, steering.",
        description="POST endpoints need the action token in the X-AscendBridge-Token header.",
        version="1",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN; /api/docs renders the schema instead
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.dashboard = state
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    _install_error_handlers(app)
    app.include_router(actions.api)
    app.include_router(actions.forms)
    app.include_router(api.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "frame-ancestors 'none'; form-action 'self'",
        )
        return response

    app.add_middleware(HostAllowMiddleware, hosts=hosts)  # added last: runs first, on every route
    return app
