"""The OpenAPI 3.1 description of every route, written by hand (served at /openapi.json)."""

from __future__ import annotations

import copy
from typing import Any

from talaria import __version__

_ERROR = {"$ref": "#/components/schemas/Error"}
_OBJECT: dict[str, Any] = {"type": "object"}
_SESSION_HEADER = {
    "X-Talaria-Session": {
        "description": "the session that holds the conversation",
        "schema": {"type": "string"},
    }
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _op(
    summary: str,
    ok: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    errors: tuple[int, ...] = (401, 404, 409, 413, 422),
    ok_status: str = "200",
    tag: str = "talaria",
) -> dict[str, Any]:
    responses: dict[str, Any] = {ok_status: ok}
    for status in errors:
        responses[str(status)] = {"description": f"error {status}", "content": _json(_ERROR)}
    operation: dict[str, Any] = {"summary": summary, "tags": [tag], "responses": responses}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(body)}
    if params:
        operation["parameters"] = params
    return operation


def _ok(schema: dict[str, Any], description: str = "ok", sse: bool = False) -> dict[str, Any]:
    content = _json(schema)
    if sse:
        content["text/event-stream"] = {"schema": {"type": "string"}}
    return {"description": description, "content": content, "headers": _SESSION_HEADER}


def _openai_op(api: str, body: dict[str, Any]) -> dict[str, Any]:
    errors = (400, 401, 404, 409, 413, 422, 502)
    return _op(f"OpenAI {api} (stream or not)", _ok(_OBJECT, sse=True), body=body, errors=errors)


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query_int(name: str, maximum: int) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 0, "maximum": maximum}
    return {"name": name, "in": "query", "required": False, "schema": schema}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_TEXT_CONTENT = {"oneOf": [{"type": "string"}, {"type": "array", "items": _OBJECT}]}
_MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {"role": {"type": "string"}, "content": _TEXT_CONTENT},
}
SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "Usage": {"type": "object", "additionalProperties": True},
    "Run": {
        "type": "object",
        "required": ["run_id", "session_id", "status", "events_url"],
        "properties": {
            "run_id": {"type": "string"},
            "session_id": {"type": "string"},
            "status": {"enum": ["running", "completed", "failed", "cancelled"]},
            "events_url": {"type": "string"},
            "created_at": {"type": "number"},
            "finished_at": {"type": ["number", "null"]},
            "final_response": {"type": ["string", "null"]},
            "usage": {"type": ["object", "null"]},
            "turn_exit_reason": {"type": ["string", "null"]},
        },
    },
    "Session": {
        "type": "object",
        "required": ["id", "message_count", "usage"],
        "properties": {
            "id": {"type": "string"},
            "title": {"type": ["string", "null"]},
            "source": {"type": "string"},
            "model": {"type": ["string", "null"]},
            "created_at": {"type": "number"},
            "updated_at": {"type": "number"},
            "message_count": {"type": "integer"},
            "usage": {"type": "object"},
            "cost_usd": {"type": ["number", "null"]},
            "preview": {"type": "string"},
            "running_run_id": {"type": ["string", "null"]},
            "usage_by_model": {
                "type": "array",
                "items": {"type": "object"},
                "description": "reading one session: its calls by model, as `talaria usage`",
            },
        },
    },
    "RewindReport": {
        "type": "object",
        "required": ["turn", "restored", "kept", "left_alone", "conversation", "summary"],
        "properties": {
            "turn": {"type": "integer"},
            "restored": _STRINGS,
            "kept": {**_STRINGS, "description": "files the user edited since: left as they are"},
            "left_alone": {
                **_STRINGS,
                "description": "files in no snapshot (over the size cap, ignored): untouched",
            },
            "conversation": {"type": "boolean"},
            "undo": {
                "type": ["integer", "null"],
                "description": "the checkpoint to rewind the files to, to undo this rewind",
            },
            "step": {
                "type": ["integer", "null"],
                "description": "the step of the turn rewound to before (null: its start)",
            },
            "summary": {"type": "string"},
        },
    },
    "Checkpoint": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "kind": {"enum": ["turn", "rewind"]},
            "label": {"type": "string"},
            "at": {"type": "number"},
            "changed": _STRINGS,
            "dropped": {"type": "boolean", "description": "its messages were rewound away"},
            "steps": {
                **_STRINGS,
                "description": "the tools of each step that could write (step 1 first): a "
                "rewind with `step` goes back to before one",
            },
        },
    },
}

_RUN_BODY = {
    "type": "object",
    "required": ["input"],
    "properties": {
        "input": {
            "type": "string",
            "minLength": 1,
            "description": "the message; `/<skill-name> request` runs that skill",
        },
        "session_id": {"type": "string", "description": "continue this session (else a new one)"},
        "when_busy": {
            "enum": ["reject", "queue", "steer", "interrupt"],
            "description": "when the session is running a turn: refuse (409, the default), "
            "run after it, join it before its next model call, or stop it and run this",
        },
    },
}
_TEXT_BODY = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "minLength": 1}},
}
_CHAT_BODY = {
    "type": "object",
    "required": ["messages"],
    "properties": {
        "model": {"type": "string", "enum": ["talaria"]},
        "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    },
}
_RESPONSES_BODY = {
    "type": "object",
    "required": ["input"],
    "properties": {
        "model": {"type": "string", "enum": ["talaria"]},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": _MESSAGE}]},
        "previous_response_id": {"type": "string"},
        "stream": {"type": "boolean"},
    },
}
_EVENTS_DOC = (
    "Server-sent events, `id:` numbered from 1, resumable with `Last-Event-ID` (or `?after=`). "
    "Names: run.started, message.delta, reasoning.delta, tool.started, tool.completed, "
    "approval.requested, approval.resolved, clarify.requested, clarify.resolved, "
    "request.withdrawn, notice, steer.accepted, steer.delivered, message.queued, "
    "queued_message.started, a sub-agent's subagent.tool.started, subagent.tool.completed and "
    "subagent.finished (their `subagent` names it, as on its approval.requested and "
    "clarify.requested), then "
    "one of run.completed, run.failed, run.cancelled."
)


def _paths() -> dict[str, Any]:
    run_id = _path("run_id")
    request_id = _path("request_id")
    session_id = _path("session_id")
    list_of = {"type": "object", "properties": {"data": {"type": "array"}}}
    return {
        "/health": {"get": _op("liveness (no key needed)", _ok(_OBJECT), errors=())},
        "/": {
            "get": _op(
                "the web chat page (no key needed; it takes the key from ?token=<key>)",
                {"description": "HTML page"},
                errors=(),
            )
        },
        "/assets/{name}": {
            "get": _op(
                "web page assets (no key needed)",
                {"description": "file"},
                params=[_path("name")],
                errors=(404,),
            )
        },
        "/openapi.json": {"get": _op("this description", _ok(_OBJECT), errors=(401,))},
        "/v1/models": {"get": _op("the served agents", _ok(list_of), errors=(401,))},
        "/v1/chat/completions": {"post": _openai_op("Chat Completions", _CHAT_BODY)},
        "/v1/responses": {"post": _openai_op("Responses", _RESPONSES_BODY)},
        "/v1/runs": {
            "post": _op(
                "start a run (one agent turn)",
                _ok(_ref("Run"), "accepted"),
                body=_RUN_BODY,
                ok_status="202",
                errors=(400, 401, 404, 409, 413, 422),
            )
        },
        "/v1/runs/{run_id}": {"get": _op("a run's state", _ok(_ref("Run")), params=[run_id])},
        "/v1/runs/{run_id}/events": {
            "get": _op(
                "the run's event stream",
                {
                    "description": _EVENTS_DOC,
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                params=[
                    run_id,
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": {"type": "integer", "minimum": 0},
                    },
                ],
            )
        },
        "/v1/runs/{run_id}/approvals/{request_id}": {
            "post": _op(
                "answer an approval",
                _ok(_OBJECT),
                params=[run_id, request_id],
                body={
                    "type": "object",
                    "required": ["decision"],
                    "properties": {"decision": {"enum": ["once", "session", "always", "deny"]}},
                },
            )
        },
        "/v1/runs/{run_id}/clarify/{request_id}": {
            "post": _op(
                "answer a clarify question",
                _ok(_OBJECT),
                params=[run_id, request_id],
                body={
                    "type": "object",
                    "required": ["answer"],
                    "properties": {"answer": {"type": "string"}},
                },
            )
        },
        "/v1/runs/{run_id}/steer": {
            "post": _op(
                "steer the running turn: the text reaches the model with its next call",
                _ok(_OBJECT, "accepted"),
                params=[run_id],
                body=_TEXT_BODY,
                ok_status="202",
                errors=(401, 404, 409, 422),
            )
        },
        "/v1/sessions/{session_id}/queue": {
            "post": _op(
                "queue a message: it runs after the turn in progress (or now, when idle)",
                _ok(_ref("Run"), "accepted"),
                params=[session_id],
                body=_TEXT_BODY,
                ok_status="202",
                errors=(401, 404, 422),
            )
        },
        "/v1/runs/{run_id}/cancel": {
            "post": _op(
                "cancel a run", _ok(_ref("Run"), "accepted"), params=[run_id], ok_status="202"
            )
        },
        "/v1/sessions": {
            "get": _op(
                "list sessions",
                _ok(list_of),
                params=[_query_int("limit", 500), _query_int("offset", 10**9)],
            )
        },
        "/v1/sessions/{session_id}": {
            "get": _op(
                "a session with its messages, usage and cost",
                _ok(_ref("Session")),
                params=[session_id],
            ),
            "patch": _op(
                "rename",
                _ok(_ref("Session")),
                params=[session_id],
                body={
                    "type": "object",
                    "required": ["title"],
                    "properties": {"title": {"type": ["string", "null"]}},
                },
            ),
            "delete": _op("delete", _ok(_OBJECT), params=[session_id]),
        },
        "/v1/sessions/{session_id}/fork": {
            "post": _op(
                "fork: a new session with a copy of the messages",
                _ok(_ref("Session"), "created"),
                params=[session_id],
                ok_status="201",
                body={"type": "object", "properties": {"title": {"type": "string"}}},
            )
        },
        "/v1/sessions/{session_id}/rewind": {
            "post": _op(
                "rewind to before a turn: its files (the user's own edits stay), its "
                "conversation, or both; the files as they were are checkpointed first",
                _ok(_ref("RewindReport")),
                params=[session_id],
                body={
                    "type": "object",
                    "required": ["turn"],
                    "properties": {
                        "turn": {"type": "integer"},
                        "step": {
                            "type": "integer",
                            "description": "before this step of the turn (files only)",
                        },
                        "files": {"type": "boolean", "default": True},
                        "conversation": {
                            "type": "boolean",
                            "description": "default: true, false with `step`",
                        },
                    },
                },
            )
        },
        "/v1/sessions/{session_id}/checkpoints": {
            "get": _op(
                "the session's checkpoints: each turn and rewind, with the files changed in it",
                _ok(
                    {
                        "type": "object",
                        "properties": {"data": {"type": "array", "items": _ref("Checkpoint")}},
                    }
                ),
                params=[session_id],
            )
        },
        "/v1/sessions/{session_id}/diff": {
            "get": _op(
                "what the agent changed in the session's files (since turn `since`), as a "
                "unified diff",
                _ok(
                    {
                        "type": "object",
                        "properties": {"session_id": _STRING, "diff": _STRING},
                    }
                ),
                params=[session_id, _query_int("since", 10**9)],
            )
        },
    }


def openapi_document() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "openapi": "3.1.0",
            "info": {"title": "talaria serve", "version": __version__},
            "components": {
                "schemas": SCHEMAS,
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            },
            "security": [{"bearer": []}, {}],
            "paths": _paths(),
        }
    )
