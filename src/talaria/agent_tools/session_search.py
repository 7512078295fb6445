"""The `session_search` agent tool: lets the model look up what happened in past sessions.

With a query it returns full-text matches grouped by session, each with a snippet and the
messages around it; without one it lists recent sessions. Output is compact JSON, trimmed so a
search never floods the context window.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from talaria.store.base import SearchHit, SearchQueryError, SessionInfo, content_text
from talaria.tools.base import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from talaria.agent_tools.services import AgentServices

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MATCHES_PER_SESSION = 3
HITS_PER_SESSION = 10
"""Hits fetched per requested session: one busy session can hold many of the best hits, and
fetching more is cheap, so other sessions still get their place."""
CONTEXT_CHARS = 300


def _clamp(limit: Any) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise ToolError(f"limit must be a whole number, got {limit!r}") from None
    return max(1, min(MAX_LIMIT, value))


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def _trim(text: str, limit: int = CONTEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _brief(message: Mapping[str, Any]) -> dict[str, str]:
    """A message reduced to role + a trimmed line of text (tool calls shown as calls)."""
    parts = [content_text(message.get("content"))]
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(f"[called {function.get('name')}({function.get('arguments', '')})]")
    return {"role": str(message.get("role")), "text": _trim(" ".join(p for p in parts if p))}


def group_hits(hits: list[SearchHit], sessions: int) -> list[dict[str, Any]]:
    """Best-first hits folded into at most `sessions` sessions, a few matches each."""
    groups: dict[str, dict[str, Any]] = {}
    for hit in hits:
        group = groups.get(hit.session_id)
        if group is None:
            if len(groups) >= sessions:
                continue
            group = groups[hit.session_id] = {
                "session_id": hit.session_id,
                "title": hit.session_title,
                "matches": [],
            }
        if len(group["matches"]) < MATCHES_PER_SESSION:
            group["matches"].append(
                {
                    "when": _when(hit.created_at),
                    "role": hit.role,
                    "snippet": _trim(hit.snippet),
                    "context": [_brief(message) for message in hit.context],
                }
            )
    return list(groups.values())


def _recent_entry(info: SessionInfo) -> dict[str, Any]:
    return {
        "session_id": info.id,
        "title": info.title,
        "when": _when(info.updated_at),
        "messages": info.message_count,
        "first_message": _trim(info.preview, 160),
    }


def _session_search(
    ctx: ToolContext[AgentServices], query: str | None = None, limit: Any = None
) -> dict[str, Any]:
    services = ctx.services
    count = _clamp(limit)
    current = services.session_id
    if query is None or not query.strip():
        recent = [s for s in services.store.recent(count + 1) if s.id != current][:count]
        return {"recent_sessions": [_recent_entry(s) for s in recent]}
    try:
        hits = services.store.search(query, limit=count * HITS_PER_SESSION, exclude_session=current)
    except SearchQueryError as exc:
        raise ToolError(str(exc)) from exc
    result: dict[str, Any] = {"query": query, "sessions": group_hits(hits, count)}
    if not hits:
        result["note"] = "no past session matches; try fewer or different words"
    return result


DESCRIPTION = (
    "Search your past sessions with the user (not the current one). With `query`: full-text "
    "search, results grouped by session with a snippet and the surrounding messages; use "
    "distinctive words (file names, error text, tool names); OR between words widens, "
    '"quotes" keep a phrase, a trailing * matches a prefix. Without `query`: the most recent '
    f"sessions. `limit`: sessions to return (default {DEFAULT_LIMIT}, max {MAX_LIMIT})."
)


SESSION_SEARCH_TOOL = Tool(
    name="session_search",
    description=DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "words to look for; omit to list recent sessions",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"sessions to return (default {DEFAULT_LIMIT})",
            },
        },
        "additionalProperties": False,
    },
    handler=_session_search,
    toolset="session_search",
    context_param="ctx",
    retry_safe=True,
)
