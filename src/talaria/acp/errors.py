"""Errors the editor shows: the message itself says what went wrong (editors show it)."""

from __future__ import annotations

from acp import RequestError

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def invalid(message: str) -> RequestError:
    return RequestError(INVALID_PARAMS, message, {"details": message})


def failed(message: str, reason: str) -> RequestError:
    return RequestError(INTERNAL_ERROR, message, {"reason": reason})
