"""Who may change the board through the dashboard, and how much they may send.

State-changing requests carry the action token in a header (`X-AscendBridge-Token`, or
`Authorization: Bearer`) or a form field; never in a cookie, so a page on another site cannot
make the browser send it (CSRF). A request whose Origin (or Referer) names another site is
refused even with a token. Bodies are capped before any handler reads them.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Optional
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_HEADER = "X-AscendBridge-Token"
TOKEN_ENV = "ASCENDBRIDGE_DASHBOARD_TOKEN"
MAX_BODY_BYTES = 64 * 1024
MIN_TOKEN_LENGTH = 16


class ActionDenied(Exception):
    """A state-changing request without a valid token or from another site (-> 401/403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check_token_strength(token: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_LENGTH} characters long")
    return token


def presented_token(request: Request, form_token: Optional[str] = None) -> Optional[str]:
    header = request.headers.get(TOKEN_HEADER)
    if header:
        return header
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return form_token


def _same_site(url: str, request: Request) -> bool:
    parts = urlsplit(url)
    host = request.headers.get("host", "")
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def authorize(request: Request, expected: str, form_token: Optional[str] = None) -> None:
    """Raise ActionDenied unless the request is same-site and carries the right token."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise ActionDenied(403, "cross-site request refused")
    origin = request.headers.get("origin")
    if origin is not None and not _same_site(origin, request):
        raise ActionDenied(403, f"request from origin '{origin}' refused (only this dashboard may post)")
    referer = request.headers.get("referer")
    if origin is None and referer and not _same_site(referer, request):
        raise ActionDenied(403, "request from another site refused (Referer does not match)")
    token = presented_token(request, form_token)
    if not token:
        raise ActionDenied(401, f"missing action token (send it in the {TOKEN_HEADER} header)")
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise ActionDenied(403, "wrong action token")


class BodyLimitMiddleware:
    """Answer 413 to any request body over the cap, declared or streamed, before handlers run."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _too_large(send, self.max_bytes)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await _too_large(send, self.max_bytes)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = f'{{"error": "request body larger than {limit} bytes"}}'.encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
