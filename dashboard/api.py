"""Read-only JSON API: the same data the pages show, plus /healthz and /metrics."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.encoders import jsonable_encoder
from fastapi.responses import PlainTextResponse

from ascendbridge.board.queries import MAX_PER_PAGE
from dashboard import prom, views
from dashboard.context import Dashboard, dashboard

router = APIRouter()


def page_params(
    q: str = Query("", max_length=200, description="substring of model id, description or failure reason"),
    stage: str | None = Query(None, description="stage filter (alone: models currently at that stage)"),
    status: str | None = Query(None, description="status filter (with stage: that stage's status)"),
    sort: str = Query("priority", description="priority | model_id | created | stage"),
    order: str = Query("desc", pattern="^(asc|desc)$"),
    page: int = Query(1, ge=1, le=1_000_000),
    per_page: int = Query(50, ge=1, le=MAX_PER_PAGE),
) -> dict[str, Any]:
    return {
        "q": q,
        "stage": stage or None,
        "status": status or None,
        "sort": sort,
        "order": order,
        "page": page,
        "per_page": per_page,
    }


@router.get("/api/overview", tags=["pages"], summary="Overview page data: funnel, models, agents, events")
def api_overview(params: dict[str, Any] = Depends(page_params), d: Dashboard = Depends(dashboard)) -> Any:
    return jsonable_encoder(views.overview(d, **params))


@router.get("/api/models", tags=["pages"], summary="Search, filter, sort and page the models")
def api_models(params: dict[str, Any] = Depends(page_params), d: Dashboard = Depends(dashboard)) -> Any:
    page = d.queries.search_models(
        q=params["q"],
        stage=params["stage"],
        status=params["status"],
        sort=params["sort"],
        descending=params["order"] != "asc",
        page=params["page"],
        per_page=params["per_page"],
    )
    return {
        "items": [asdict(r) for r in page.items],
        "total": page.total,
        "page": page.page,
        "pages": page.pages,
        "per_page": page.per_page,
    }


@router.get("/api/models/{model_id:path}", tags=["pages"], summary="Model page data: timeline, evidence, guidance")
def api_model(model_id: str, d: Dashboard = Depends(dashboard)) -> Any:
    return jsonable_encoder(views.model(d, model_id))


@router.get("/api/reports", tags=["pages"], summary="Success rates, stage durations, speedup distribution")
def api_reports(d: Dashboard = Depends(dashboard)) -> Any:
    return jsonable_encoder(views.reports(d))


@router.get("/api/agents", tags=["pages"], summary="Agents with heartbeat freshness")
def api_agents(d: Dashboard = Depends(dashboard)) -> Any:
    return views.agent_rows(d)


@router.get("/api/hosts", tags=["pages"], summary="Each host's devices and what holds them now")
def api_hosts(d: Dashboard = Depends(dashboard)) -> Any:
    return views.host_rows(d, views.agent_rows(d))


@router.get("/api/events", tags=["pages"], summary="Board events after an id (oldest first)")
def api_events(
    after: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000), d: Dashboard = Depends(dashboard)
) -> Any:
    return [e.model_dump() for e in d.store.list_events(after_id=after, limit=limit)]


@router.get("/api/changes", tags=["pages"], summary="Newest event id: poll it to know when to refresh")
def api_changes(d: Dashboard = Depends(dashboard)) -> dict[str, int]:
    return {"last_event_id": d.queries.last_event_id()}


@router.get("/healthz", tags=["health"], summary="Liveness: the board answers")
def healthz(d: Dashboard = Depends(dashboard)) -> dict[str, Any]:
    return {"status": "ok", "board": str(d.queries.path), "last_event_id": d.queries.last_event_id()}


@router.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=PlainTextResponse)
def metrics(d: Dashboard = Depends(dashboard)) -> PlainTextResponse:
    return PlainTextResponse(prom.render(d.queries.counts()), media_type=prom.CONTENT_TYPE)
