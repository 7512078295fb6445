"""The runs API: start a turn, follow its events (resumable), answer its requests, cancel it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria.server.bodies import field_of, non_empty, read_json
from talaria.server.errors import ApiError
from talaria.server.hub import TurnRequest, hub_of
from talaria.server.runs import Run
from talaria.server.sse import KEEPALIVE_S, PING, frame, sse_response


def _run_view(run: Run) -> dict[str, Any]:
    view = run.summary()
    view["events_url"] = f"/v1/runs/{run.id}/events"
    if run.result is not None:
        view["final_response"] = run.result.get("final_response")
        view["usage"] = run.result.get("usage")
        view["turn_exit_reason"] = run.result.get("turn_exit_reason")
    return view


async def create_run(request: Request) -> Response:
    body = await read_json(request)
    text = non_empty(field_of(body, "input", str, required=True), "'input'")
    session_id = field_of(body, "session_id", str)
    when_busy = field_of(body, "when_busy", str, default="reject")
    if when_busy not in WHEN_BUSY:
        raise ApiError(422, f"'when_busy' must be one of {', '.join(WHEN_BUSY)}")
    turn = TurnRequest(text=text, session_id=session_id or None, when_busy=when_busy, skills=True)
    run = await hub_of(request).start_turn(turn)
    return JSONResponse(_run_view(run), status_code=202)


async def steer_run(request: Request) -> Response:
    body = await read_json(request)
    text = non_empty(field_of(body, "text", str, required=True), "'text'")
    steer_id = hub_of(request).steer(request.path_params["run_id"], text)
    return JSONResponse({"steer_id": steer_id, "run_id": request.path_params["run_id"]}, 202)


async def queue_message(request: Request) -> Response:
    body = await read_json(request)
    text = non_empty(field_of(body, "text", str, required=True), "'text'")
    run, message_id = await hub_of(request).queue(request.path_params["session_id"], text)
    return JSONResponse({**_run_view(run), "message_id": message_id}, status_code=202)


async def get_run(request: Request) -> Response:
    return JSONResponse(_run_view(hub_of(request).run(request.path_params["run_id"])))


def _last_event_id(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if not raw.strip().isdigit():
        raise ApiError(422, f"Last-Event-ID must be an event id (a number), got {raw!r}")
    return int(raw)


async def run_events(request: Request) -> Response:
    run = hub_of(request).run(request.path_params["run_id"])
    after = _last_event_id(request)

    async def stream() -> AsyncIterator[bytes]:
        async for event in run.follow(after, keepalive=KEEPALIVE_S):
            yield PING if event is None else frame(event.data, event.name, event.id)

    return sse_response(stream())


async def answer_approval(request: Request) -> Response:
    body = await read_json(request)
    decision = field_of(body, "decision", str, required=True)
    return _answer(request, decision)


async def answer_clarify(request: Request) -> Response:
    body = await read_json(request)
    return _answer(request, field_of(body, "answer", str, required=True))


def _answer(request: Request, answer: str) -> Response:
    params = request.path_params
    hub_of(request).respond(params["run_id"], params["request_id"], answer)
    return JSONResponse({"request_id": params["request_id"], "accepted": True})


async def cancel_run(request: Request) -> Response:
    run = hub_of(request).cancel(request.path_params["run_id"])
    return JSONResponse(_run_view(run), status_code=202)


WHEN_BUSY = ("reject", "queue", "steer", "interrupt")

ROUTES = [
    Route("/v1/runs", create_run, methods=["POST"]),
    Route("/v1/runs/{run_id}/steer", steer_run, methods=["POST"]),
    Route("/v1/sessions/{session_id}/queue", queue_message, methods=["POST"]),
    Route("/v1/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/runs/{run_id}/events", run_events, methods=["GET"]),
    Route("/v1/runs/{run_id}/approvals/{request_id}", answer_approval, methods=["POST"]),
    Route("/v1/runs/{run_id}/clarify/{request_id}", answer_clarify, methods=["POST"]),
    Route("/v1/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]
