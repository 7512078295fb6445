"""The sessions API over the same store as the CLI: list, read, rename, delete, fork.

A session started here resumes in the terminal (`talaria chat --resume <id>`) and back.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria.checkpoints import CheckpointError
from talaria.loop.session import new_session_id
from talaria.offload import run_blocking
from talaria.server.bodies import field_of, read_json
from talaria.server.errors import ApiError
from talaria.server.hub import SessionHub, hub_of
from talaria.store.base import SessionInfo
from talaria.store.usage import summarise


def session_view(info: SessionInfo, hub: SessionHub) -> dict[str, Any]:
    view = asdict(info)
    view.pop("system_prompt", None)
    view["cost_usd"] = (info.usage or {}).get("estimated_cost_usd")
    run = hub.busy_run(info.id)
    view["running_run_id"] = run.id if run is not None else None
    return view


async def _info(hub: SessionHub, session_id: str) -> SessionInfo:
    info = await run_blocking(hub.store.get_session, session_id)
    if info is None:
        raise ApiError(404, f"no session {session_id!r}")
    return info


def _int_param(request: Request, name: str, default: int, upper: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) > upper:
        raise ApiError(422, f"'{name}' must be an integer between 0 and {upper}")
    return int(raw)


async def list_sessions(request: Request) -> Response:
    hub = hub_of(request)
    limit = _int_param(request, "limit", 50, 500)
    offset = _int_param(request, "offset", 0, 10**9)
    infos = await run_blocking(hub.store.list_sessions, limit, offset)
    return JSONResponse({"data": [session_view(info, hub) for info in infos]})


async def read_session(request: Request) -> Response:
    hub = hub_of(request)
    info = await _info(hub, request.path_params["session_id"])
    messages = await run_blocking(hub.store.load_messages, info.id)
    records = await run_blocking(hub.store.usage_records, None, info.id)
    by_model = [row.to_dict() for row in summarise(records, "model")]
    return JSONResponse(
        {**session_view(info, hub), "messages": messages, "usage_by_model": by_model}
    )


async def rename_session(request: Request) -> Response:
    hub = hub_of(request)
    body = await read_json(request)
    if "title" not in body:
        raise ApiError(422, "'title' is required (a string, or null to clear it)")
    title = field_of(body, "title", str)
    info = await _info(hub, request.path_params["session_id"])
    await run_blocking(hub.store.rename, info.id, title)
    return JSONResponse(session_view(await _info(hub, info.id), hub))


async def delete_session(request: Request) -> Response:
    hub = hub_of(request)
    info = await _info(hub, request.path_params["session_id"])
    await hub.forget(info.id)
    await run_blocking(hub.store.delete_session, info.id)
    return JSONResponse({"id": info.id, "deleted": True})


async def fork_session(request: Request) -> Response:
    """A new session holding a copy of the messages, made in one store operation (a copy
    that fails leaves no half session); the original is untouched."""
    hub = hub_of(request)
    body = await read_json(request)
    title = field_of(body, "title", str)
    info = await _info(hub, request.path_params["session_id"])
    fork_id = new_session_id()
    await run_blocking(hub.store.fork_session, info.id, fork_id, title=title)
    return JSONResponse(session_view(await _info(hub, fork_id), hub), status_code=201)


async def rewind_session(request: Request) -> Response:
    """Back to before a turn: its files (what the agent changed since; the user's own edits
    stay), its conversation, or both; the files as they were are kept as a checkpoint first."""
    body = await read_json(request)
    turn = field_of(body, "turn", int, required=True)
    step = field_of(body, "step", int, default=None)
    files = field_of(body, "files", bool, default=True)
    conversation = field_of(body, "conversation", bool, default=step is None)
    if not (files or conversation):
        raise ApiError(422, "nothing to rewind: 'files' and 'conversation' are both false")
    agent = await hub_of(request).idle_agent(request.path_params["session_id"])
    try:
        report = await agent.arewind(turn, files=files, conversation=conversation, step=step)
    except KeyError as exc:
        raise ApiError(404, str(exc.args[0])) from None
    except (ValueError, CheckpointError) as exc:
        raise ApiError(422, str(exc)) from None
    return JSONResponse({**asdict(report), "summary": report.summary()})


async def list_checkpoints(request: Request) -> Response:
    agent = await hub_of(request).idle_agent(request.path_params["session_id"])
    turns = await agent.acheckpoints()
    return JSONResponse({"data": [asdict(turn) for turn in turns]})


async def session_diff(request: Request) -> Response:
    """What the agent changed in the session's files (since turn `since`), a unified diff."""
    since = request.query_params.get("since")
    if since is not None and not since.isdigit():
        raise ApiError(422, "'since' must be a turn number")
    agent = await hub_of(request).idle_agent(request.path_params["session_id"])
    try:
        diff = await agent.adiff(int(since) if since is not None else None)
    except KeyError as exc:
        raise ApiError(404, str(exc.args[0])) from None
    return JSONResponse({"session_id": request.path_params["session_id"], "diff": diff})


ROUTES = [
    Route("/v1/sessions", list_sessions, methods=["GET"]),
    Route("/v1/sessions/{session_id}", read_session, methods=["GET"]),
    Route("/v1/sessions/{session_id}", rename_session, methods=["PATCH"]),
    Route("/v1/sessions/{session_id}", delete_session, methods=["DELETE"]),
    Route("/v1/sessions/{session_id}/fork", fork_session, methods=["POST"]),
    Route("/v1/sessions/{session_id}/rewind", rewind_session, methods=["POST"]),
    Route("/v1/sessions/{session_id}/checkpoints", list_checkpoints, methods=["GET"]),
    Route("/v1/sessions/{session_id}/diff", session_diff, methods=["GET"]),
]
