"""State-changing requests: register, priority, retry, skip, pause/resume, guidance.

Each action exists twice with one implementation: as JSON under /api/ (token in a header) and as
an HTML form post under /actions/ (token in a form field, then a redirect back). Every action
goes through BoardStore with origin 'dashboard', so the board's event log says who did it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from ascendbridge.board import BoardError, Registration
from ascendbridge.naming import InvalidModelIdError
from ascendbridge.registration_file import model_path
from dashboard.context import Dashboard, dashboard
from dashboard.security import ActionDenied, authorize

ORIGIN = "dashboard"
MAX_PRIORITY = 1_000_000


class BadAction(Exception):
    """A well-formed request the dashboard cannot act on (-> 400)."""


class RegisterBody(BaseModel):
    model_id: str = Field(max_length=200)
    source: str = "huggingface"
    url: str | None = Field(default=None, max_length=2000)
    path: str | None = Field(default=None, max_length=4000)
    revision: str | None = Field(default=None, max_length=200)
    description: str = Field(default="", max_length=2000)
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)


class PriorityBody(BaseModel):
    priority: int = Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)


class StageBody(BaseModel):
    stage: str | None = None


class SkipBody(BaseModel):
    stage: str


class GuidanceBody(BaseModel):
    text: str = Field(min_length=1, max_length=4000)


# ---------------------------------------------------------------------- the actions
def register(d: Dashboard, body: RegisterBody) -> dict[str, Any]:
    reg = Registration(**body.model_dump())
    try:
        if reg.path:  # the same checks as board_ops register_model --path
            reg.path = model_path(reg.path, Path.cwd(), reg.source)
        [(record, created)] = d.store.register_models([reg], origin=ORIGIN)
    except (InvalidModelIdError, BoardError, ValueError) as exc:
        raise BadAction(str(exc)) from exc
    return {"model": record.model_dump(), "created": created}


def set_priority(d: Dashboard, model_id: str, body: PriorityBody) -> dict[str, Any]:
    return {"model": d.store.set_priority(model_id, body.priority, origin=ORIGIN).model_dump()}


def retry(d: Dashboard, model_id: str, body: StageBody) -> dict[str, Any]:
    return {"task": d.store.retry(model_id, body.stage or None, origin=ORIGIN).model_dump()}


def skip(d: Dashboard, model_id: str, body: SkipBody) -> dict[str, Any]:
    return {"task": d.store.skip(model_id, body.stage, origin=ORIGIN).model_dump()}


def pause(d: Dashboard, model_id: str, paused: bool) -> dict[str, Any]:
    return {"model": d.store.set_paused(model_id, paused, origin=ORIGIN).model_dump()}


def guidance(d: Dashboard, model_id: str | None, body: GuidanceBody) -> dict[str, Any]:
    try:
        record = d.store.add_guidance(body.text, model_id=model_id, origin=ORIGIN)
    except BoardError as exc:
        if type(exc) is BoardError:  # empty after stripping, too long: the request, not the state
            raise BadAction(str(exc)) from exc
        raise
    return {"guidance": record.model_dump()}


# ---------------------------------------------------------------------- JSON API
def require_token(request: Request, d: Dashboard = Depends(dashboard)) -> Dashboard:
    authorize(request, d.token)
    return d


api = APIRouter(prefix="/api", tags=["actions"])


@api.post("/models", status_code=201, summary="Register a model")
def api_register(body: RegisterBody, d: Dashboard = Depends(require_token)) -> JSONResponse:
    result = register(d, body)
    return JSONResponse(result, status_code=201 if result["created"] else 200)


@api.post("/models/{model_id:path}/priority", summary="Set a model's priority")
def api_priority(model_id: str, body: PriorityBody, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return set_priority(d, model_id, body)


@api.post("/models/{model_id:path}/retry", summary="Retry a failed, blocked or skipped stage")
def api_retry(model_id: str, body: StageBody, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return retry(d, model_id, body)


@api.post("/models/{model_id:path}/skip", summary="Skip a stage")
def api_skip(model_id: str, body: SkipBody, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return skip(d, model_id, body)


@api.post("/models/{model_id:path}/pause", summary="Pause a model (the team lead claims nothing of it)")
def api_pause(model_id: str, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return pause(d, model_id, True)


@api.post("/models/{model_id:path}/resume", summary="Resume a paused model")
def api_resume(model_id: str, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return pause(d, model_id, False)


@api.post("/models/{model_id:path}/guidance", status_code=201, summary="Post guidance for a model")
def api_model_guidance(model_id: str, body: GuidanceBody, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return guidance(d, model_id, body)


@api.post("/guidance", status_code=201, summary="Post global guidance to the team lead")
def api_guidance(body: GuidanceBody, d: Dashboard = Depends(require_token)) -> dict[str, Any]:
    return guidance(d, None, body)


# ---------------------------------------------------------------------- HTML forms
forms = APIRouter(include_in_schema=False)

FORM_ACTIONS = ("register", "priority", "retry", "skip", "pause", "resume", "guidance")


def _back(target: str, fallback: str) -> str:
    """Redirect only to a path on this site (no scheme, no '//host')."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return fallback


def _form_body(cls: type[BaseModel], form: dict[str, str]) -> Any:
    try:
        return cls(**{k: v for k, v in form.items() if v != "" or k == "text"})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadAction(f"{where}: {first.get('msg', 'invalid value')}") from exc


def _apply_form(d: Dashboard, action: str, form: dict[str, str]) -> str:
    """Run one form action; returns the model id it concerned ('' for global guidance)."""
    if action not in FORM_ACTIONS:
        raise BadAction(f"unknown action '{action}' (expected one of: {', '.join(FORM_ACTIONS)})")
    model_id = form.get("model_id", "").strip()
    if action not in ("register", "guidance") and not model_id:
        raise BadAction("model_id is missing")
    if action == "register":
        model_id = register(d, _form_body(RegisterBody, form))["model"]["model_id"]
    elif action == "priority":
        set_priority(d, model_id, _form_body(PriorityBody, form))
    elif action == "retry":
        retry(d, model_id, _form_body(StageBody, form))
    elif action == "skip":
        skip(d, model_id, _form_body(SkipBody, form))
    elif action in ("pause", "resume"):
        pause(d, model_id, action == "pause")
    else:
        guidance(d, model_id or None, _form_body(GuidanceBody, form))
    return model_id


@forms.post("/actions/{action}")
async def form_action(action: str, request: Request, d: Dashboard = Depends(dashboard)) -> RedirectResponse:
    raw = await request.form()
    form = {k: v for k, v in raw.items() if isinstance(v, str)}
    authorize(request, d.token, form.get("token"))
    model_id = await run_in_threadpool(_apply_form, d, action, form)  # board writes may wait on a lock
    fallback = f"/models/{model_id}" if model_id else "/"
    return RedirectResponse(_back(form.get("next", ""), fallback), status_code=303)


__all__ = ["api", "forms", "BadAction", "ActionDenied"]
