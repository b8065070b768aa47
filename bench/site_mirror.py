"""A company-style index mirror for measuring a run with the public registry cut off.

    uv run python bench/site_mirror.py serve --unix /tmp/mirror.sock --user U --password P
    python3 bench/site_mirror.py bridge --port 8080 --unix /tmp/mirror.sock     # inside `unshare -n`

`serve` is a pull-through PEP 503 mirror behind Basic auth (as Nexus or devpi are): `/simple/NAME/`
is PyPI's page with its file links rewritten to `/files/...`, which it streams from
files.pythonhosted.org; it listens on a Unix socket and counts what it served. `bridge` runs inside
a network namespace that has only loopback (`unshare -n`) and forwards 127.0.0.1:PORT to that
socket, so the run inside can reach this mirror and nothing else. docs/measurements/hosts.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from collections.abc import AsyncIterator

UPSTREAM = "https://pypi.org/simple/"
FILES = "https://files.pythonhosted.org/"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def bridge(port: int, socket_path: str) -> None:
    """127.0.0.1:PORT -> the Unix socket, both directions, one connection per client."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def serve(socket_path: str, user: str, password: str) -> None:
    """The mirror itself (Starlette on uvicorn, both framework dependencies)."""
    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    client = httpx.AsyncClient(timeout=600, follow_redirects=True)
    served = {"pages": 0, "files": 0, "bytes": 0}

    def denied(request: Request) -> Response | None:
        if request.headers.get("authorization") != want:
            return Response(status_code=401, headers={"WWW-Authenticate": 'Basic realm="mirror"'})
        return None

    async def page(request: Request) -> Response:
        if (refusal := denied(request)) is not None:
            return refusal
        upstream = await client.get(UPSTREAM + request.path_params["project"] + "/")
        served["pages"] += 1
        body = upstream.text.replace(FILES, "/files/")
        return Response(body, status_code=upstream.status_code, media_type="text/html")

    async def file(request: Request) -> Response:
        if (refusal := denied(request)) is not None:
            return refusal
        upstream = await client.send(client.build_request("GET", FILES + request.path_params["path"]), stream=True)
        served["files"] += 1

        async def body() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_bytes():
                served["bytes"] += len(chunk)
                yield chunk
            await upstream.aclose()
            print(f"served {served}", file=sys.stderr, flush=True)

        headers = {k: v for k, v in upstream.headers.items() if k.lower() in ("content-length", "content-type")}
        return StreamingResponse(body(), status_code=upstream.status_code, headers=headers)

    app = Starlette(routes=[Route("/simple/{project}/", page), Route("/files/{path:path}", file)])
    uvicorn.run(app, uds=socket_path, log_level="warning")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--unix", required=True)
    s.add_argument("--user", required=True)
    s.add_argument("--password", required=True)
    b = sub.add_parser("bridge")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--unix", required=True)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.unix, args.user, args.password)
    else:
        asyncio.run(bridge(args.port, args.unix))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
