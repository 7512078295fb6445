"""Errors the editor shows: the message itself says what went wrong (editors show it).

An exception a method does not turn into a `RequestError` itself would reach the SDK, which
answers every one of them "Internal error" with the reason in `data.details`, where editors
do not look: `reasoned` puts the reason in the message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from acp import RequestError

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("talaria.acp")


def invalid(message: str) -> RequestError:
    return RequestError(INVALID_PARAMS, message, {"details": message})


def failed(message: str, reason: str) -> RequestError:
    return RequestError(INTERNAL_ERROR, message, {"reason": reason})


def reasoned(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """An ACP method whose unexpected failures answer with their reason as the message."""

    @functools.wraps(method)
    async def answer(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except RequestError:
            raise
        except Exception as exc:
            log.warning("%s failed", method.__name__, exc_info=True)
            raise _internal(exc) from exc

    return answer


def _internal(exc: Exception) -> RequestError:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    data: dict[str, Any] = {"details": reason, "type": type(exc).__name__}
    return RequestError(INTERNAL_ERROR, f"talaria: {reason}", data)
