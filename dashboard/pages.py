"""Server-rendered HTML pages (Jinja2, autoescaped) and the adaptation downloads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, HTMLResponse, StreamingResponse
from fastapi.templating import Jinja2Templates

from dashboard import evidence, views
from dashboard.api import page_params
from dashboard.context import Dashboard, dashboard
from dashboard.security import TOKEN_HEADER

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["TOKEN_HEADER"] = TOKEN_HEADER

router = APIRouter(include_in_schema=False)


def render(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, name, context, status_code=status_code)


@router.get("/", response_class=HTMLResponse)
def overview_page(
    request: Request, params: dict[str, Any] = Depends(page_params), d: Dashboard = Depends(dashboard)
) -> HTMLResponse:
    return render(request, "overview.html", {"page": "overview", **views.overview(d, **params)})


@router.get("/download/{model_id:path}")
def download_adaptation(model_id: str, d: Dashboard = Depends(dashboard)) -> StreamingResponse:
    record = d.store.get_model(model_id)
    adapt_dir = evidence.adaptation_dir(d.adaptations_dir, record.adaptation_name)
    if adapt_dir is None:
        raise evidence.EvidenceError(f"model '{model_id}' has no adaptation directory yet")
    archive = evidence.zip_adaptation(adapt_dir)

    def chunks() -> Iterator[bytes]:
        with archive:
            while block := archive.read(1 << 16):
                yield block

    filename = f"{record.adaptation_name}.zip"
    return StreamingResponse(
        chunks(), media_type="application/zip", headers={"Content-Disposition": f'attachment; filename="{filename}"'}
    )


@router.get("/trace/{model_id:path}/{name}")
def download_trace(model_id: str, name: str, d: Dashboard = Depends(dashboard)) -> FileResponse:
    record = d.store.get_model(model_id)
    path = evidence.trace_file(evidence.adaptation_dir(d.adaptations_dir, record.adaptation_name), name)
    return FileResponse(path, media_type="application/json", filename=name)


@router.get("/models/{model_id:path}", response_class=HTMLResponse)
def model_page(request: Request, model_id: str, d: Dashboard = Depends(dashboard)) -> HTMLResponse:
    return render(request, "model.html", {"page": "model", **views.model(d, model_id)})


@router.get("/reports", response_class=HTMLResponse)
def reports_page(request: Request, d: Dashboard = Depends(dashboard)) -> HTMLResponse:
    return render(request, "reports.html", {"page": "reports", **views.reports(d)})


@router.get("/regressions", response_class=HTMLResponse)
def regressions_page(request: Request, d: Dashboard = Depends(dashboard)) -> HTMLResponse:
    return render(request, "regressions.html", {"page": "regressions", **views.regressions(d)})


@router.get("/agents", response_class=HTMLResponse)
def agents_page(request: Request, d: Dashboard = Depends(dashboard)) -> HTMLResponse:
    agents = views.agent_rows(d)
    return render(
        request,
        "agents.html",
        {
            "page": "agents",
            "agents": agents,
            "hosts": views.host_rows(d, agents),
            "acceptance": views.acceptance_rows(d),
            "fresh_s": d.heartbeat_fresh_s,
            "last_event_id": d.queries.last_event_id(),
        },
    )


@router.get("/api/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """The OpenAPI schema rendered server-side: Swagger UI would pull its assets from a CDN."""
    schema = request.app.openapi()
    endpoints = []
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            params = [(p["name"], p["in"], p.get("description", "")) for p in op.get("parameters", [])]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            body_ref = body.get("$ref", "").rsplit("/", 1)[-1]
            endpoints.append(
                {
                    "path": path,
                    "method": method.upper(),
                    "summary": op.get("summary", ""),
                    "params": params,
                    "body": body_ref,
                    "token": method.upper() == "POST",
                }
            )
    return render(
        request,
        "api_docs.html",
        {"page": "api", "endpoints": endpoints, "schemas": schema.get("components", {}).get("schemas", {})},
    )
