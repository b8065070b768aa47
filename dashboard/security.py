"""Who may change the board through the dashboard, and how much they may send.

State-changing requests carry the action token in a header (`X-AscendBridge-Token`, or
`Authorization: Bearer`) or a form field; never in a cookie, so a page on another site cannot
make the browser send it (CSRF). A request whose Origin (or Referer) names another site is
refused even with a token. Bodies are capped before any handler reads them. Every request must
name, in its Host header, a name the server answers to (DNS rebinding: a page on a domain that
resolves to 127.0.0.1 would otherwise read the board through the operator's browser).
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ascendbridge.settings import GeneralSettings, section

TOKEN_HEADER = "X-AscendBridge-Token"
TOKEN_ENV = "ASCENDBRIDGE_DASHBOARD_TOKEN"
MAX_BODY_BYTES = 64 * 1024
MIN_TOKEN_LENGTH = 16
HOSTS_ENV = "ASCENDBRIDGE_DASHBOARD_HOSTS"  # general.dashboard_hosts: more Host names to accept, comma-separated
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})


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


def presented_token(request: Request, form_token: str | None = None) -> str | None:
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


def authorize(request: Request, expected: str, form_token: str | None = None) -> None:
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
    """Answer 413 to any request body over the cap, declared or streamed, before handlers run.

    A streamed (chunked) body is read here, up to the cap, before the app sees the request: a
    handler that parses it would otherwise turn the refusal into its own 400."""

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
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                buffered = [message]
                break
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await _too_large(send, self.max_bytes)
                return
            if not message.get("more_body", False):
                buffered = [{"type": "http.request", "body": bytes(body), "more_body": False}]
                break

        async def replay() -> Message:
            return buffered.pop() if buffered else await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, limit: int) -> None:
    body = f'{{"error": "request body larger than {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names this dashboard answers to: loopback names, the address it is bound to,
    the names given (--allow-host) and those in $ASCENDBRIDGE_DASHBOARD_HOSTS. Bound to every
    address (0.0.0.0 / ::), it also answers to this machine's host name."""
    names = set(LOOPBACK_NAMES)
    names.add(bind_host)
    if bind_host in _ANY_ADDRESS:
        import socket

        names.update({socket.gethostname(), socket.getfqdn()})
    names.update(extra)
    names.update(section(GeneralSettings).dashboard_hosts.split(","))
    return frozenset(_bare(n) for n in names if n.strip() and n.strip() not in _ANY_ADDRESS)


def _bare(name: str) -> str:
    """A host name without brackets, trailing dot or case: `[::1]` -> `::1`, `Example.` -> `example`."""
    return name.strip().strip("[]").rstrip(".").lower()


def host_of(header: str) -> str:
    """The host part of a Host header (`name:port`, `[v6]:port`, or without the port)."""
    header = header.strip()
    if header.startswith("["):
        return _bare(header[: header.find("]") + 1])
    return _bare(header.rsplit(":", 1)[0] if header.count(":") == 1 else header)


class HostAllowMiddleware:
    """Answer 421 to a request whose Host header names a host this dashboard is not (DNS
    rebinding), on every route, before anything else runs."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host_of(header) in self.hosts:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        message = f"Host '{header[:100]}' is not a name of this dashboard (allow it with --allow-host or ${HOSTS_ENV})"
        body = json.dumps({"error": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 421,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
