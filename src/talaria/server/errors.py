"""One JSON error shape for every route: `{"error": {"type": ..., "message": ...}}`.

Handlers turn Starlette's own 404/405, our `ApiError`s, store errors and anything unexpected
into it, so a client parses failures the same way wherever they come from.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from talaria.store.base import SessionBusy, SessionExists, SessionNotFound, StoreError, TitleInUse

log = logging.getLogger("talaria.server")

STATUS_TYPES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    422: "invalid_request",
    500: "server_error",
    503: "store_unavailable",
    502: "agent_failed",
}


class ApiError(Exception):
    """An error a client can act on; `kind` overrides the type the status implies."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or STATUS_TYPES.get(status, "error")


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    return {"error": {"type": kind or STATUS_TYPES.get(status, "error"), "message": message}}


def error_response(
    status: int, message: str, kind: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, kind), status_code=status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.kind)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {
        404: f"no route for {request.method} {request.url.path}",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, headers=dict(exc.headers or {}))


STORE_STATUS: dict[type, int] = {
    SessionNotFound: 404,
    TitleInUse: 409,
    SessionExists: 409,
    SessionBusy: 409,
}


async def _store_error(request: Request, exc: Exception) -> Response:
    status = next((code for kind, code in STORE_STATUS.items() if isinstance(exc, kind)), 503)
    return error_response(
        status, str(exc), "session_busy" if isinstance(exc, SessionBusy) else None
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, f"internal error: {type(exc).__name__}")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ApiError: _api_error,
    HTTPException: _http_error,
    StoreError: _store_error,
    Exception: _unexpected,
}
