"""Reading request bodies: JSON objects and typed fields, each mistake one clear 4xx."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from starlette.requests import Request

from talaria.server.errors import ApiError

_MISSING = object()
MAX_DEPTH = 100
"""Deepest nesting of objects and arrays a request body may have (OpenAI-shaped bodies,
tool schemas included, stay far below): deeper ones would exhaust the recursion of the
parser or of whatever walks the body later."""


async def read_json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"null")
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        _too_deep()
    if not isinstance(body, dict):
        raise ApiError(422, "the request body must be a JSON object")
    if depth_over(body, MAX_DEPTH):
        _too_deep()
    return body


def _too_deep() -> NoReturn:
    raise ApiError(400, f"the request body nests objects and arrays deeper than {MAX_DEPTH}")


def depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists more than `limit` deep (walked without
    recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        pending.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def field_of(
    body: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    *,
    required: bool = False,
    default: Any = None,
) -> Any:
    """`body[name]` if it has the expected type; 422 naming the field otherwise."""
    value = body.get(name, _MISSING)
    if value is _MISSING or value is None:
        if required:
            raise ApiError(422, f"'{name}' is required")
        return default
    if isinstance(value, bool) and kind is not bool and bool not in _as_tuple(kind):
        raise ApiError(422, f"'{name}' has the wrong type")
    if not isinstance(value, kind):
        expected = " or ".join(t.__name__ for t in _as_tuple(kind))
        raise ApiError(422, f"'{name}' must be of type {expected}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def text_of(content: Any) -> str | None:
    """The text of an OpenAI message content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        ]
        texts = [t for t in parts if isinstance(t, str)]
        return "\n".join(texts) if texts else None
    return None


def non_empty(text: str | None, what: str) -> str:
    if text is None or not text.strip():
        raise ApiError(422, f"{what} must be non-empty text")
    return text
